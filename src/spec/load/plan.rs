//! Pass 1 of the full reader: each document's header (`apiVersion`, `kind`, `metadata.name`,
//! `items`) decides which type each object is deserialised into, with the location of each object.

use super::*;

#[derive(Deserialize)]
pub(super) struct Header {
    #[serde(rename = "apiVersion")]
    pub(super) api_version: Option<String>,
    pub(super) kind: Option<String>,
    pub(super) metadata: Option<HeaderMeta>,
    pub(super) items: Option<Vec<Spanned<Header>>>,
}

#[derive(Deserialize)]
pub(super) struct HeaderMeta {
    pub(super) name: Option<String>,
    #[serde(rename = "generateName")]
    pub(super) generate_name: Option<String>,
}

/// The workload kinds that carry a pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WorkloadKind {
    Pod,
    Deployment,
    StatefulSet,
    DaemonSet,
    ReplicaSet,
    ReplicationController,
    Job,
    CronJob,
}

impl WorkloadKind {
    pub(super) fn parse(kind: &str) -> Option<Self> {
        Some(match kind {
            "Pod" => Self::Pod,
            "Deployment" => Self::Deployment,
            "StatefulSet" => Self::StatefulSet,
            "DaemonSet" => Self::DaemonSet,
            "ReplicaSet" => Self::ReplicaSet,
            "ReplicationController" => Self::ReplicationController,
            "Job" => Self::Job,
            "CronJob" => Self::CronJob,
            _ => return None,
        })
    }

    pub(super) fn api_version(self) -> &'static str {
        match self {
            Self::Pod | Self::ReplicationController => "v1",
            Self::Deployment | Self::StatefulSet | Self::DaemonSet | Self::ReplicaSet => "apps/v1",
            Self::Job | Self::CronJob => "batch/v1",
        }
    }
}

/// What is built for one document or list item.
pub(super) enum Plan {
    Object(WorkloadKind),
    List(Vec<Plan>),
    Skip,
}

pub(super) struct Ctx<'a> {
    pub(super) source: &'a str,
    pub(super) warnings: &'a mut Vec<Warning>,
}

impl Ctx<'_> {
    fn invalid(&self, at: &serde_saphyr::Location, message: String) -> LoadError {
        LoadError::Invalid {
            path: self.source.to_string(),
            line: at.line(),
            column: at.column(),
            field: None,
            message,
        }
    }
}

pub(super) fn plan_for(
    header: &Spanned<Header>,
    depth: usize,
    ctx: &mut Ctx<'_>,
) -> Result<Plan, LoadError> {
    let at = &header.referenced;
    let h = &header.value;
    let kind = match h.kind.as_deref() {
        Some(k) if !k.is_empty() => k,
        _ => return Err(ctx.invalid(at, "kind not set".into())),
    };
    let api_version = match h.api_version.as_deref() {
        Some(v) if !v.is_empty() => v,
        _ => return Err(ctx.invalid(at, "apiVersion not set".into())),
    };
    if kind == "List" || (kind.ends_with("List") && h.items.is_some()) {
        if depth >= MAX_LIST_DEPTH {
            return Err(ctx.invalid(at, format!("lists nested deeper than {MAX_LIST_DEPTH}")));
        }
        let mut plans = Vec::new();
        for item in h.items.iter().flatten() {
            plans.push(plan_for(item, depth + 1, ctx)?);
        }
        return Ok(Plan::List(plans));
    }
    match WorkloadKind::parse(kind) {
        Some(wk) if wk.api_version() == api_version => Ok(Plan::Object(wk)),
        // kubectl's wording for a kind the server does not serve in that version.
        Some(_) => Err(ctx.invalid(
            at,
            format!("no matches for kind \"{kind}\" in version \"{api_version}\""),
        )),
        None => {
            let name = h
                .metadata
                .as_ref()
                .and_then(|m| m.name.clone().or_else(|| m.generate_name.clone()))
                .unwrap_or_default();
            // Placed like every other warning and error: file:line:col first.
            ctx.warnings.push(Warning {
                source: format!("{}:{}:{}", ctx.source, at.line(), at.column()),
                object: Some(format!("{kind}/{name}")),
                field: None,
                message: format!("skipped: {api_version} {kind} has no pod template"),
            });
            Ok(Plan::Skip)
        }
    }
}
