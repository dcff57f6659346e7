//! From typed workload objects to [`PodTemplate`]s, and list items to their paths.

use super::*;

pub(super) fn starts_with(segs: &[Seg], prefix: &[Seg]) -> bool {
    prefix.len() <= segs.len()
        && prefix.iter().zip(segs).all(|(a, b)| match (a, b) {
            (Seg::Key(x), Seg::Key(y)) => x == y,
            (Seg::Index(x), Seg::Index(y)) => x == y,
            _ => false,
        })
}

pub(super) fn flatten(parsed: Parsed, path: &mut Vec<Seg>, out: &mut Vec<(Vec<Seg>, Object)>) {
    match parsed {
        Parsed::Object(object) => out.push((path.clone(), object)),
        Parsed::Skipped => {}
        Parsed::List(items) => {
            for (i, item) in items.into_iter().enumerate() {
                path.push(Seg::Key("items".into()));
                path.push(Seg::Index(i));
                flatten(item, path, out);
                path.truncate(path.len() - 2);
            }
        }
    }
}

pub(super) fn template_of(source: &str, document: usize, object: Object) -> PodTemplate {
    fn tpl(t: Option<PodTemplateSpec>) -> (Option<ObjectMeta>, Option<PodSpec>) {
        t.map(|t| (t.metadata, t.spec)).unwrap_or_default()
    }
    let replicas = match &object {
        Object::Deployment(o) => o.spec.as_ref().and_then(|s| s.replicas),
        Object::StatefulSet(o) => o.spec.as_ref().and_then(|s| s.replicas),
        Object::ReplicaSet(o) => o.spec.as_ref().and_then(|s| s.replicas),
        Object::ReplicationController(o) => o.spec.as_ref().and_then(|s| s.replicas),
        _ => None,
    };
    let (kind, metadata, (template_metadata, spec), prefix) = match object {
        Object::Pod(o) => (
            "Pod",
            o.metadata.clone(),
            (Some(o.metadata), o.spec),
            "spec",
        ),
        Object::Deployment(o) => (
            "Deployment",
            o.metadata,
            tpl(o.spec.map(|s| s.template)),
            "spec.template.spec",
        ),
        Object::StatefulSet(o) => (
            "StatefulSet",
            o.metadata,
            tpl(o.spec.map(|s| s.template)),
            "spec.template.spec",
        ),
        Object::DaemonSet(o) => (
            "DaemonSet",
            o.metadata,
            tpl(o.spec.map(|s| s.template)),
            "spec.template.spec",
        ),
        Object::ReplicaSet(o) => (
            "ReplicaSet",
            o.metadata,
            tpl(o.spec.and_then(|s| s.template)),
            "spec.template.spec",
        ),
        Object::ReplicationController(o) => (
            "ReplicationController",
            o.metadata,
            tpl(o.spec.and_then(|s| s.template)),
            "spec.template.spec",
        ),
        Object::Job(o) => (
            "Job",
            o.metadata,
            tpl(o.spec.map(|s| s.template)),
            "spec.template.spec",
        ),
        Object::CronJob(o) => (
            "CronJob",
            o.metadata,
            tpl(o.spec.and_then(|s| s.job_template.spec).map(|s| s.template)),
            "spec.jobTemplate.spec.template.spec",
        ),
    };
    let name = metadata
        .name
        .clone()
        .or_else(|| metadata.generate_name.clone())
        .unwrap_or_default();
    let namespace = metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    PodTemplate {
        source: source.to_string(),
        document,
        kind: kind.to_string(),
        name,
        namespace,
        template_metadata: template_metadata.unwrap_or_default(),
        metadata,
        field_prefix: prefix.to_string(),
        spec: spec.unwrap_or_default(),
        replicas,
    }
}
