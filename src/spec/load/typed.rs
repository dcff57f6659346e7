//! Pass 2 of the full reader: every document read straight into its typed object, with
//! unknown fields collected as warnings and errors located by field path.

use super::*;

/// One typed workload object.
pub(super) enum Object {
    Pod(Box<Pod>),
    Deployment(Box<Deployment>),
    StatefulSet(Box<StatefulSet>),
    DaemonSet(Box<DaemonSet>),
    ReplicaSet(Box<ReplicaSet>),
    ReplicationController(Box<ReplicationController>),
    Job(Box<Job>),
    CronJob(Box<CronJob>),
}

pub(super) enum Parsed {
    Object(Object),
    List(Vec<Parsed>),
    Skipped,
}

/// A path segment of an unknown field, as reported by `serde_ignored`.
#[derive(Debug, Clone)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

pub(super) struct TypedDoc {
    pub(super) parsed: Parsed,
    pub(super) ignored: Vec<Vec<Seg>>,
}

thread_local! {
    /// The plans from pass 1, one per non-empty document, consumed by pass 2.
    static PLANS: RefCell<VecDeque<Plan>> = const { RefCell::new(VecDeque::new()) };
    /// The field path at which pass 2 failed, if it did.
    static ERROR_PATH: RefCell<Option<String>> = const { RefCell::new(None) };
}

impl<'de> Deserialize<'de> for TypedDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let plan = PLANS
            .with(|p| p.borrow_mut().pop_front())
            .ok_or_else(|| de::Error::custom("internal error: documents changed between passes"))?;
        let mut ignored = Vec::new();
        let mut track = serde_path_to_error::Track::new();
        let mut on_ignored = |path: serde_ignored::Path<'_>| ignored.push(segments(&path));
        let result = {
            let d = serde_path_to_error::Deserializer::new(d, &mut track);
            let d = serde_ignored::Deserializer::new(d, &mut on_ignored);
            PlanSeed(&plan).deserialize(d)
        };
        match result {
            Ok(parsed) => Ok(TypedDoc { parsed, ignored }),
            Err(e) => {
                let path = track.path().to_string();
                ERROR_PATH.with(|p| *p.borrow_mut() = Some(path));
                Err(e)
            }
        }
    }
}

/// Flatten a `serde_ignored` path, dropping the `?` segments that stand for `Option` layers.
pub(super) fn segments(path: &serde_ignored::Path<'_>) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut cur = path;
    loop {
        match cur {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                out.push(Seg::Index(*index));
                cur = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                out.push(Seg::Key(key.clone()));
                cur = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => cur = parent,
        }
    }
    out.reverse();
    out
}

pub(super) fn render_segments(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

pub(super) struct PlanSeed<'p>(&'p Plan);

impl<'de> DeserializeSeed<'de> for PlanSeed<'_> {
    type Value = Parsed;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        let obj = match self.0 {
            Plan::Skip => {
                Skip::deserialize(d)?;
                return Ok(Parsed::Skipped);
            }
            Plan::List(items) => return d.deserialize_map(ListVisitor(items)),
            Plan::Object(kind) => object(*kind, d)?,
        };
        Ok(Parsed::Object(obj))
    }
}

/// Deserialise one workload object of a known kind.
pub(super) fn object<'de, D: Deserializer<'de>>(
    kind: WorkloadKind,
    d: D,
) -> Result<Object, D::Error> {
    Ok(match kind {
        WorkloadKind::Pod => Object::Pod(Deserialize::deserialize(d)?),
        WorkloadKind::Deployment => Object::Deployment(Deserialize::deserialize(d)?),
        WorkloadKind::StatefulSet => Object::StatefulSet(Deserialize::deserialize(d)?),
        WorkloadKind::DaemonSet => Object::DaemonSet(Deserialize::deserialize(d)?),
        WorkloadKind::ReplicaSet => Object::ReplicaSet(Deserialize::deserialize(d)?),
        WorkloadKind::ReplicationController => {
            Object::ReplicationController(Deserialize::deserialize(d)?)
        }
        WorkloadKind::Job => Object::Job(Deserialize::deserialize(d)?),
        WorkloadKind::CronJob => Object::CronJob(Deserialize::deserialize(d)?),
    })
}

/// Consumes any value without reporting any part of it as unknown. `serde_ignored` reports
/// every value read through `deserialize_ignored_any`, and `IgnoredAny` reads nested values
/// that way, so a skipped object would be reported field by field; `Skip` recurses with
/// `deserialize_any` instead. Recursion depth is bounded by serde-saphyr's nesting budget.
pub(super) struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Skip)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i128<E>(self, _: i128) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u128<E>(self, _: u128) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_bytes<E>(self, _: &[u8]) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_none<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        Skip::deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        Skip::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Skip, A::Error> {
        use de::VariantAccess;
        let (Skip, variant) = data.variant::<Skip>()?;
        variant.newtype_variant::<Skip>()?;
        Ok(Skip)
    }
}

pub(super) struct ListVisitor<'p>(&'p [Plan]);

impl<'de> Visitor<'de> for ListVisitor<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a List object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut items = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "items" => items = map.next_value_seed(OptionalItems(self.0))?,
                "apiVersion" | "kind" | "metadata" => {
                    map.next_value::<Skip>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Parsed::List(items))
    }
}

/// `items: null` (or an empty `items:`) is an empty list, as kubectl reads it.
pub(super) struct OptionalItems<'p>(&'p [Plan]);

impl<'de> DeserializeSeed<'de> for OptionalItems<'_> {
    type Value = Vec<Parsed>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Parsed>, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for OptionalItems<'_> {
    type Value = Vec<Parsed>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_none<E>(self) -> Result<Vec<Parsed>, E> {
        Ok(Vec::new())
    }

    fn visit_unit<E>(self) -> Result<Vec<Parsed>, E> {
        Ok(Vec::new())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Parsed>, D::Error> {
        ItemsSeed(self.0).deserialize(d)
    }
}

pub(super) struct ItemsSeed<'p>(&'p [Plan]);

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_> {
    type Value = Vec<Parsed>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Parsed>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_> {
    type Value = Vec<Parsed>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Parsed>, A::Error> {
        let mut out = Vec::new();
        for plan in self.0 {
            match seq.next_element_seed(PlanSeed(plan))? {
                Some(parsed) => out.push(parsed),
                None => break,
            }
        }
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(out)
    }
}

/// Clears the thread-local state even if deserialisation unwinds.
pub(super) struct PassGuard;

impl Drop for PassGuard {
    fn drop(&mut self) {
        PLANS.with(|p| p.borrow_mut().clear());
        ERROR_PATH.with(|p| p.borrow_mut().take());
    }
}

pub(super) fn saphyr_error(
    source: &str,
    e: &serde_saphyr::Error,
    field: Option<String>,
) -> LoadError {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((0, 0));
    LoadError::Invalid {
        path: source.to_string(),
        line,
        column,
        field: field.filter(|f| !f.is_empty() && f != "."),
        message: error_message(e),
    }
}

/// The error's message without the location and source snippet serde-saphyr adds, since
/// [`LoadError`] prints the location itself.
pub(crate) fn error_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let mut msg = text.lines().next().unwrap_or_default().trim();
    // serde-saphyr ends its messages with " at line L, column C".
    if let Some(at) = msg.find(" at line ") {
        msg = &msg[..at];
    }
    // A Rust type name ("invalid i32") means nothing to someone writing a manifest.
    if let Some(ty) = msg.strip_prefix("invalid ")
        && let Some(words) = plain_type_words(ty)
    {
        return words.to_string();
    }
    // A hint about serde-saphyr's own API means nothing to someone writing a manifest.
    msg.replace(", set DuplicateKeyPolicy in Options if acceptable", "")
}

/// What a value of a Rust scalar type is called in a message for people.
pub(super) fn plain_type_words(ty: &str) -> Option<&'static str> {
    match ty {
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => Some("expected an integer"),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => Some("expected a non-negative integer"),
        "f32" | "f64" => Some("expected a number"),
        "bool" => Some("expected true or false"),
        _ => None,
    }
}

/// serde-saphyr's limits, sized for one file of up to [`MAX_FILE_BYTES`].
///
/// Its defaults count over the whole stream and stop at 1,024 documents and 250,000 nodes,
/// which a few megabytes of ordinary multi-document manifests exceed. The structural limits
/// are raised to what 16 MiB of text can hold; alias replay, the one way a small input can
/// grow without bound (the "billion laughs"), is kept tight, since manifests rarely use aliases.
pub(super) fn yaml_options() -> serde_saphyr::Options {
    // Both types are non-exhaustive, so they are built by mutation, not struct expressions.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 100_000;
    budget.max_nodes = 8_000_000;
    budget.max_events = 32_000_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = 250_000;
    options
}

/// The full reader: serde-saphyr, twice (headers, then typed objects). Handles all of YAML
/// and gives every error its location and field path.
pub(super) fn load_full(source: &str, text: &str, loaded: &mut Loaded) -> Result<(), LoadError> {
    // Pass 1.
    let headers: Vec<Spanned<Header>> =
        serde_saphyr::from_multiple_with_options(text, yaml_options())
            .map_err(|e| saphyr_error(source, &e, None))?;
    let mut plans = VecDeque::new();
    {
        let mut ctx = Ctx {
            source,
            warnings: &mut loaded.warnings,
        };
        for header in &headers {
            plans.push_back(plan_for(header, 0, &mut ctx)?);
        }
    }
    // Pass 2.
    let _guard = PassGuard;
    PLANS.with(|p| *p.borrow_mut() = plans);
    ERROR_PATH.with(|p| p.borrow_mut().take());
    let docs: Vec<TypedDoc> = serde_saphyr::from_multiple_with_options(text, yaml_options())
        .map_err(|e| {
            let field = ERROR_PATH.with(|p| p.borrow_mut().take());
            saphyr_error(source, &e, field)
        })?;
    for (document, doc) in docs.into_iter().enumerate() {
        finish_document(source, document, doc.parsed, doc.ignored, loaded);
    }
    Ok(())
}

/// Turn one document's objects into templates, and its unknown fields into warnings.
pub(super) fn finish_document(
    source: &str,
    document: usize,
    parsed: Parsed,
    ignored: Vec<Vec<Seg>>,
    loaded: &mut Loaded,
) {
    let mut objects = Vec::new();
    flatten(parsed, &mut Vec::new(), &mut objects);
    let mut labels = Vec::new();
    for (item_path, object) in objects {
        let template = template_of(source, document, object);
        labels.push((item_path, format!("{}/{}", template.kind, template.name)));
        loaded.templates.push(template);
    }
    for segs in ignored {
        // Attribute a field inside a list item to that item, with a path relative to it.
        let owner = labels
            .iter()
            .filter(|(prefix, _)| starts_with(&segs, prefix))
            .max_by_key(|(prefix, _)| prefix.len());
        let (object, rel) = match owner {
            Some((prefix, label)) => (Some(label.clone()), &segs[prefix.len()..]),
            None => (None, &segs[..]),
        };
        let field = render_segments(rel);
        loaded.warnings.push(Warning {
            source: source.to_string(),
            object,
            message: format!("unknown field \"{field}\""),
            field: Some(field),
        });
    }
}
