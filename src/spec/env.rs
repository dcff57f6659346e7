//! Container environment and `$(VAR)` expansion, the way the kubelet builds them (used for
//! container commands and for exec probes and hooks)
//! (pkg/kubelet/kubelet_pods.go `makeEnvironmentVariables`,
//! third_party/forked/golang/expansion).

use k8s_openapi::api::core::v1::Container;
use std::collections::HashMap;

/// Why a container's environment cannot be built locally.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// `valueFrom` needs the API server (secrets, config maps, downward API).
    #[error(
        "env[{index}] {name:?}: valueFrom is not supported outside a cluster; use a plain value"
    )]
    ValueFromUnsupported {
        /// Position in `env`.
        index: usize,
        /// Variable name.
        name: String,
    },
}

/// Expands `$(VAR)` references in `input` from `lookup`.
///
/// The kubelet's rules: a reference to a defined variable is replaced; an undefined one is left
/// as written; `$$` is an escaped `$`; a `$` not followed by `(` or `$`, and an unterminated
/// `$(`, stay literal.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('(') {
            match tail.find(')') {
                Some(end) => {
                    let name = &tail[..end];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &tail[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = tail;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The container's environment in order: each plain `value` is expanded from the variables
/// defined before it (as the kubelet does). `valueFrom` is an error: there is no API server.
pub fn container_env(container: &Container) -> Result<Vec<(String, String)>, EnvError> {
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    for (index, e) in container.env.iter().flatten().enumerate() {
        if e.value_from.is_some() {
            return Err(EnvError::ValueFromUnsupported {
                index,
                name: e.name.clone(),
            });
        }
        let raw = e.value.clone().unwrap_or_default();
        let value = expand(&raw, |n| index_of.get(n).map(|&i| vars[i].1.clone()));
        match index_of.get(&e.name) {
            Some(&i) => vars[i].1 = value,
            None => {
                index_of.insert(e.name.clone(), vars.len());
                vars.push((e.name.clone(), value));
            }
        }
    }
    Ok(vars)
}

/// Expands every `$(VAR)` in `args` from `env`.
pub fn expand_all(args: &[String], env: &[(String, String)]) -> Vec<String> {
    let lookup = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    args.iter().map(|a| expand(a, lookup)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource};

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// R7.21: `$(VAR)` from static env; unresolvable stays literal (`TestProbe`: `some $(A)
    /// $(B)` with A=script gives `some script $(B)`); `$$` escapes.
    #[test]
    fn r7_21_expansion_rules() {
        let e = env(&[("A", "script")]);
        assert_eq!(
            expand_all(&["some $(A) $(B)".into()], &e),
            vec!["some script $(B)"]
        );
        assert_eq!(expand_all(&["$$(A)".into()], &e), vec!["$(A)"]);
        assert_eq!(expand_all(&["cost $5 $(A".into()], &e), vec!["cost $5 $(A"]);
        assert_eq!(expand_all(&["$$$(A)".into()], &e), vec!["$script"]);
        assert_eq!(expand_all(&["a$".into()], &e), vec!["a$"]);
        assert_eq!(expand_all(&["$x$(A".into()], &e), vec!["$x$(A"]);
        assert_eq!(expand_all(&["é$(A)é".into()], &e), vec!["éscripté"]);
    }

    /// Env values expand from the variables defined before them, not after.
    #[test]
    fn env_values_expand_from_earlier_variables() {
        let c = Container {
            env: Some(vec![
                EnvVar {
                    name: "HOST".into(),
                    value: Some("db".into()),
                    ..Default::default()
                },
                EnvVar {
                    name: "URL".into(),
                    value: Some("pg://$(HOST)/$(LATER)".into()),
                    ..Default::default()
                },
                EnvVar {
                    name: "LATER".into(),
                    value: Some("x".into()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        let vars = container_env(&c).unwrap();
        assert_eq!(vars[1], ("URL".to_string(), "pg://db/$(LATER)".to_string()));
    }

    /// `valueFrom` is reported, not silently dropped.
    #[test]
    fn value_from_is_unsupported() {
        let c = Container {
            env: Some(vec![EnvVar {
                name: "SECRET".into(),
                value_from: Some(EnvVarSource::default()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert_eq!(
            container_env(&c).unwrap_err().to_string(),
            "env[0] \"SECRET\": valueFrom is not supported outside a cluster; use a plain value"
        );
    }
}
