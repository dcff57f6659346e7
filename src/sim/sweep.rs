//! `--sweep`: vary one probe field over a range and compare the summaries, so thresholds can be
//! picked from evidence.
//!
//! A sweep is `[CONTAINER.][PROBE.]FIELD=VALUES`, e.g. `failureThreshold=1..10`,
//! `livenessProbe.failureThreshold=1..10` or `app.readinessProbe.timeoutSeconds=1,2,5`. PROBE is
//! `livenessProbe`, `readinessProbe` or `startupProbe`; FIELD one of the probe's timing fields;
//! VALUES a range `A..B` (inclusive) or a comma-separated list. The container may be left out
//! when the pod has one container, the probe when that container has one probe.

use k8s_openapi::api::core::v1::{PodSpec, Probe};

/// A parsed sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// The text as given.
    pub text: String,
    /// Container name (`None`: the pod's only container).
    pub container: Option<String>,
    /// `livenessProbe`, `readinessProbe` or `startupProbe` (`None`: the container's only probe).
    pub probe: Option<String>,
    /// The timing field.
    pub field: String,
    /// The values to try, in order.
    pub values: Vec<i64>,
}

/// A bad sweep.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid sweep {text:?}: {message}")]
pub struct SweepError {
    /// The sweep text.
    pub text: String,
    /// What is wrong.
    pub message: String,
}

const PROBES: [&str; 3] = ["livenessProbe", "readinessProbe", "startupProbe"];
const FIELDS: [&str; 6] = [
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
    "terminationGracePeriodSeconds",
];

impl std::str::FromStr for Sweep {
    type Err = SweepError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Sweep::parse(s)
    }
}

impl Sweep {
    /// Parses `[CONTAINER.][PROBE.]FIELD=VALUES`.
    pub fn parse(text: &str) -> Result<Sweep, SweepError> {
        let err = |m: &str| SweepError {
            text: text.to_string(),
            message: m.to_string(),
        };
        const SHAPE: &str = "expected [CONTAINER.][PROBE.]FIELD=VALUES";
        let (path, values) = text.split_once('=').ok_or_else(|| err(SHAPE))?;
        let parts: Vec<&str> = path.trim().split('.').collect();
        let (container, probe, field) = match parts.as_slice() {
            [f] => (None, None, *f),
            [p, f] if PROBES.contains(p) => (None, Some(*p), *f),
            [c, f] => (Some(c.to_string()), None, *f),
            [c, p, f] => (Some(c.to_string()), Some(*p), *f),
            _ => return Err(err(SHAPE)),
        };
        if let Some(probe) = probe.filter(|p| !PROBES.contains(p)) {
            return Err(err(&format!(
                "unknown probe {probe:?} (use {})",
                PROBES.join(", ")
            )));
        }
        if !FIELDS.contains(&field) {
            return Err(err(&format!(
                "unknown field {field:?} (use {})",
                FIELDS.join(", ")
            )));
        }
        let values = values.trim();
        let values: Vec<i64> = if let Some((a, b)) = values.split_once("..") {
            let a: i64 = a.trim().parse().map_err(|_| err("bad range start"))?;
            let b: i64 = b.trim().parse().map_err(|_| err("bad range end"))?;
            // `abs_diff`: `b - a` overflows for `i64::MIN..i64::MAX` (and wrapped past this
            // check into a capacity overflow in release builds).
            if b < a || a.abs_diff(b) > 1000 {
                return Err(err("a range is A..B with A <= B and at most 1000 values"));
            }
            (a..=b).collect()
        } else {
            values
                .split(',')
                .map(|v| {
                    v.trim()
                        .parse::<i64>()
                        .map_err(|_| err("values are integers"))
                })
                .collect::<Result<_, _>>()?
        };
        if values.is_empty() {
            return Err(err("no values"));
        }
        Ok(Sweep {
            text: text.to_string(),
            container,
            probe: probe.map(str::to_string),
            field: field.to_string(),
            values,
        })
    }

    /// The pod spec with the field set to `value`.
    pub fn apply(&self, spec: &PodSpec, value: i64) -> Result<PodSpec, SweepError> {
        let err = |m: String| SweepError {
            text: self.text.clone(),
            message: m,
        };
        let mut spec = spec.clone();
        let mut all: Vec<&mut k8s_openapi::api::core::v1::Container> = spec
            .init_containers
            .iter_mut()
            .flatten()
            .chain(spec.containers.iter_mut())
            .collect();
        let c = match &self.container {
            Some(name) => all
                .into_iter()
                .find(|c| &c.name == name)
                .ok_or_else(|| err(format!("no container {name:?} in the manifest")))?,
            None if all.len() == 1 => all.remove(0),
            None => {
                return Err(err(
                    "the pod has several containers: write CONTAINER.PROBE.FIELD".into(),
                ));
            }
        };
        let name = c.name.clone();
        let mut probes: Vec<(&str, &mut Option<Probe>)> = vec![
            ("livenessProbe", &mut c.liveness_probe),
            ("readinessProbe", &mut c.readiness_probe),
            ("startupProbe", &mut c.startup_probe),
        ];
        let p = match &self.probe {
            Some(wanted) => probes
                .into_iter()
                .find(|(field, _)| field == wanted)
                .and_then(|(_, p)| p.as_mut())
                .ok_or_else(|| err(format!("container {name:?} has no {wanted}")))?,
            None => {
                probes.retain(|(_, p)| p.is_some());
                match probes.len() {
                    1 => probes.remove(0).1.as_mut().expect("kept: it is set"),
                    0 => return Err(err(format!("container {name:?} has no probe"))),
                    _ => {
                        let fields: Vec<&str> = probes.iter().map(|(f, _)| *f).collect();
                        return Err(err(format!(
                            "container {name:?} has several probes ({}): write PROBE.{}",
                            fields.join(", "),
                            self.field
                        )));
                    }
                }
            }
        };
        let v32 = i32::try_from(value).map_err(|_| err(format!("{value} is out of range")))?;
        match self.field.as_str() {
            "initialDelaySeconds" => p.initial_delay_seconds = Some(v32),
            "timeoutSeconds" => p.timeout_seconds = Some(v32),
            "periodSeconds" => p.period_seconds = Some(v32),
            "successThreshold" => p.success_threshold = Some(v32),
            "failureThreshold" => p.failure_threshold = Some(v32),
            _ => p.termination_grace_period_seconds = Some(value),
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_applies() {
        let s = Sweep::parse("livenessProbe.failureThreshold=1..4").unwrap();
        assert_eq!(s.values, vec![1, 2, 3, 4]);
        let s2 = Sweep::parse("app.readinessProbe.timeoutSeconds=1, 2,5").unwrap();
        assert_eq!(
            (s2.container.as_deref(), s2.values.clone()),
            (Some("app"), vec![1, 2, 5])
        );
        let spec: PodSpec = serde_json::from_value(serde_json::json!({"containers": [
            {"name": "app", "livenessProbe": {"tcpSocket": {"port": 1}}}]}))
        .unwrap();
        let out = s.apply(&spec, 7).unwrap();
        assert_eq!(
            out.containers[0]
                .liveness_probe
                .as_ref()
                .unwrap()
                .failure_threshold,
            Some(7)
        );
        assert!(
            s2.apply(&spec, 1)
                .unwrap_err()
                .to_string()
                .contains("has no readinessProbe")
        );
        assert!(Sweep::parse("livenessProbe.threshold=1..2").is_err());
        assert!(Sweep::parse("a.b.c.d=1").is_err());
    }

    /// The README's shorthand: a bare FIELD names the only container's only probe; with
    /// several probes the error says how to choose.
    #[test]
    fn a_bare_field_names_the_only_probe() {
        let s = Sweep::parse("failureThreshold=1..10").unwrap();
        assert_eq!((s.container.as_deref(), s.probe.as_deref()), (None, None));
        assert_eq!(s.values.len(), 10);
        let one: PodSpec = serde_json::from_value(serde_json::json!({"containers": [
            {"name": "app", "livenessProbe": {"tcpSocket": {"port": 1}}}]}))
        .unwrap();
        let out = s.apply(&one, 4).unwrap();
        assert_eq!(
            out.containers[0]
                .liveness_probe
                .as_ref()
                .unwrap()
                .failure_threshold,
            Some(4)
        );
        let two: PodSpec = serde_json::from_value(serde_json::json!({"containers": [
            {"name": "app", "livenessProbe": {"tcpSocket": {"port": 1}},
             "readinessProbe": {"tcpSocket": {"port": 1}}}]}))
        .unwrap();
        let e = s.apply(&two, 4).unwrap_err().to_string();
        assert!(e.contains("write PROBE.failureThreshold"), "{e}");
        let c = Sweep::parse("app.failureThreshold=2").unwrap();
        assert_eq!((c.container.as_deref(), c.probe), (Some("app"), None));
        assert!(Sweep::parse("livenessProbe.failureThreshold=5..1").is_err());
    }

    /// Issue 44 crash 5: the widest range is refused with the range's error, not a capacity
    /// overflow (debug builds: an arithmetic overflow panic).
    #[test]
    fn i44_5_a_range_as_wide_as_i64_is_refused() {
        for text in [
            "failureThreshold=-9223372036854775808..9223372036854775807",
            "failureThreshold=-1..9223372036854775807",
            "failureThreshold=0..1001",
        ] {
            let e = Sweep::parse(text).unwrap_err();
            assert_eq!(
                e.message, "a range is A..B with A <= B and at most 1000 values",
                "{text}"
            );
        }
        assert_eq!(
            Sweep::parse("failureThreshold=0..1000")
                .unwrap()
                .values
                .len(),
            1001
        );
    }
}
