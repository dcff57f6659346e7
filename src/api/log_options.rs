//! The API server's validation of a log request's options (`ValidatePodLogOptions` in
//! pkg/apis/core/validation/validation.go), for `/api/v1/namespaces/NS/pods/NAME/log`.
//!
//! Upstream's `LogREST` validates the options before it looks the pod up, and answers a
//! failure as `errors.NewInvalid(PodLogOptions, name, errs)`: 422 with reason `Invalid` and
//! the message `PodLogOptions "NAME" is invalid: sinceSeconds: Invalid value: -1: must be
//! greater than 0`.

use crate::spec::field::{BadValue, FieldError, FieldPath};

/// The options of one log request that validation looks at, as parsed from the query.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LogOptions<'q> {
    /// `sinceSeconds`, when given.
    pub since_seconds: Option<i64>,
    /// `sinceTime`, when given (only its presence is checked here).
    pub since_time: Option<&'q str>,
}

/// Every rule of `ValidatePodLogOptions` about `sinceSeconds` and `sinceTime` that `opts`
/// breaks, in upstream's order and words.
pub fn validate(opts: &LogOptions<'_>) -> Vec<FieldError> {
    match (opts.since_seconds, opts.since_time) {
        (Some(_), Some(_)) => vec![FieldError::forbidden(
            &FieldPath::new(""),
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        )],
        (Some(secs), None) if secs < 1 => vec![FieldError::invalid(
            &FieldPath::new("sinceSeconds"),
            BadValue::Int(secs),
            "must be greater than 0",
        )],
        _ => Vec::new(),
    }
}

/// `errors.NewInvalid(kind, name, errs).Error()`: `KIND "NAME" is invalid: ERR`, or the
/// errors as `[ERR1, ERR2]` when there are several (`ErrorList.ToAggregate`).
pub fn invalid_message(kind: &str, name: &str, errs: &[FieldError]) -> String {
    let list: Vec<String> = errs.iter().map(ToString::to_string).collect();
    let joined = match list.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!("{kind} {name:?} is invalid: {joined}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(since_seconds: Option<i64>, since_time: Option<&str>) -> Option<String> {
        let errs = validate(&LogOptions {
            since_seconds,
            since_time,
        });
        (!errs.is_empty()).then(|| invalid_message("PodLogOptions", "web", &errs))
    }

    #[test]
    fn since_seconds_must_be_positive() {
        assert_eq!(
            message(Some(-1), None).as_deref(),
            Some(
                "PodLogOptions \"web\" is invalid: sinceSeconds: Invalid value: -1: must be greater than 0"
            )
        );
        assert!(message(Some(0), None).is_some());
        assert_eq!(message(Some(1), None), None);
        assert_eq!(message(None, None), None);
        assert_eq!(message(None, Some("2026-01-01T00:00:00Z")), None);
    }

    #[test]
    fn since_seconds_and_since_time_exclude_each_other() {
        let text = message(Some(10), Some("2026-01-01T00:00:00Z")).unwrap();
        assert!(
            text.ends_with("at most one of `sinceTime` or `sinceSeconds` may be specified"),
            "{text}"
        );
    }
}
