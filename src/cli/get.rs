//! `probelet get pods`: kubectl's `get` against probelet's API, for machines without kubectl.
//! The server prints the rows (the Table form); this lays them out as kubectl does.

use super::api_client::{self, ACCEPT_TABLE, Client, ConnectArgs, encode};
use super::tabwriter::TabWriter;
use anyhow::Context;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::process::ExitCode;

/// Arguments of `probelet get`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to list: `pods` (`pod`, `po`) or `events` (`event`, `ev`).
    #[arg(value_name = "RESOURCE")]
    resource: String,
    /// One object's name.
    name: Option<String>,
    #[command(flatten)]
    connect: ConnectArgs,
    /// List across every namespace (adds a NAMESPACE column).
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Output format: `wide` (every column), `json` or `yaml`.
    #[arg(short = 'o', long, value_enum)]
    output: Option<Output>,
    /// A label selector (`app=web`, `tier in (a,b)`, `!canary`).
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// After listing, print each change as it happens.
    #[arg(short = 'w', long)]
    watch: bool,
}

/// `-o` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Wide,
    Json,
    Yaml,
}

/// Runs `probelet get`.
pub fn run(args: Args) -> ExitCode {
    match get(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => api_client::fail(&e),
    }
}

/// The collection a resource name stands for (`pods`, `events`).
fn collection(resource: &str) -> anyhow::Result<&'static str> {
    match resource {
        "pods" | "pod" | "po" => Ok("pods"),
        "events" | "event" | "ev" => Ok("events"),
        // The server may well serve it (deployments, services, ...): the limit is `get`'s.
        other => anyhow::bail!(
            "probelet get lists pods (pod, po) and events (event, ev) only, not {other:?}: use kubectl for the server's other resources"
        ),
    }
}

fn get(args: &Args) -> anyhow::Result<()> {
    let kind = collection(&args.resource)?;
    let client = Client::new(&args.connect.server)?;
    let ns = &args.connect.namespace;
    let base = if args.all_namespaces {
        format!("/api/v1/{kind}")
    } else {
        format!("/api/v1/namespaces/{ns}/{kind}")
    };
    let mut query = Vec::new();
    if let Some(s) = &args.selector {
        query.push(format!("labelSelector={}", encode(s)));
    }
    let list_path = match &args.name {
        // One object: kubectl reads it directly, so a missing one is a NotFound.
        Some(name) => format!("/api/v1/namespaces/{ns}/{kind}/{}", encode(name)),
        None => with_query(&base, &query),
    };
    let mut stdout = std::io::stdout().lock();
    match args.output {
        Some(format @ (Output::Json | Output::Yaml)) => {
            let value: serde_json::Value = client.get_json(&list_path)?;
            let value = if args.name.is_some() {
                value
            } else {
                as_list(value, kind)
            };
            let text = match format {
                Output::Json => to_go_json(&value),
                _ => serde_saphyr::to_string(&value).context("cannot write YAML")?,
            };
            stdout.write_all(text.as_bytes())?;
            if !text.ends_with('\n') {
                stdout.write_all(b"\n")?;
            }
            if args.watch {
                anyhow::bail!("--watch prints tables only (leave out -o json/yaml)");
            }
            Ok(())
        }
        output => {
            let wide = output == Some(Output::Wide);
            let table: serde_json::Value = client.get(&list_path, ACCEPT_TABLE, false)?.json()?;
            let mut printer = TablePrinter::new(wide, args.all_namespaces);
            let text = printer.print(&table)?;
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
            if text.is_empty() && !args.watch {
                if args.all_namespaces {
                    eprintln!("No resources found");
                } else {
                    eprintln!("No resources found in {ns} namespace.");
                }
            }
            if !args.watch {
                return Ok(());
            }
            let rv = table["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("0")
                .to_string();
            let mut query = query.clone();
            if let Some(name) = &args.name {
                query.push(format!(
                    "fieldSelector={}",
                    encode(&format!("metadata.name={name}"))
                ));
            }
            query.push("watch=true".into());
            query.push(format!("resourceVersion={}", encode(&rv)));
            let watch = client.get(&with_query(&base, &query), ACCEPT_TABLE, true)?;
            for line in watch.body.lines() {
                let line = line.context("the watch stream broke")?;
                if line.trim().is_empty() {
                    continue;
                }
                let event: Value =
                    serde_json::from_str(&line).context("the server sent invalid JSON")?;
                if event["type"] == "ERROR" {
                    let o = &event["object"];
                    return Err(api_client::ApiError::Status {
                        reason: o["reason"].as_str().unwrap_or_default().to_string(),
                        message: o["message"].as_str().unwrap_or_default().to_string(),
                    }
                    .into());
                }
                let text = printer.print(&event["object"])?;
                stdout.write_all(text.as_bytes())?;
                stdout.flush()?;
            }
            Ok(())
        }
    }
}

fn with_query(path: &str, query: &[String]) -> String {
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

/// A `PodList`/`EventList` as kubectl prints it: a `v1` `List` whose items carry their kind.
fn as_list(mut list: Value, collection: &str) -> Value {
    let kind = if collection == "events" {
        "Event"
    } else {
        "Pod"
    };
    let mut items = match list.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    for item in &mut items {
        if let Value::Object(m) = item {
            m.entry("apiVersion").or_insert_with(|| json!("v1"));
            m.entry("kind").or_insert_with(|| json!(kind));
        }
    }
    json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}})
}

/// JSON as kubectl prints it (Go's `json.MarshalIndent` with four spaces): keys sorted, and
/// `<`, `>`, `&` escaped as Go's encoder does.
pub fn to_go_json(value: &Value) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    // Serialising a `Value` into memory cannot fail.
    let _ = serde::Serialize::serialize(value, &mut ser);
    let text = String::from_utf8_lossy(&out);
    // These characters only occur inside strings in JSON text, so replacing them everywhere
    // is the same as escaping them in strings.
    let mut escaped = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        match c {
            '<' => escaped.push_str("\\u003c"),
            '>' => escaped.push_str("\\u003e"),
            '&' => escaped.push_str("\\u0026"),
            '\u{2028}' => escaped.push_str("\\u2028"),
            '\u{2029}' => escaped.push_str("\\u2029"),
            c => escaped.push(c),
        }
    }
    escaped.push('\n');
    escaped
}

/// Prints Tables as kubectl does: the header once, priority-0 columns (all with `wide`), and
/// one tab writer across a watch so rows stay aligned.
struct TablePrinter {
    wide: bool,
    namespaces: bool,
    header_printed: bool,
    /// The columns shown (indices into the cells) and their headers, from the first Table.
    columns: Option<Vec<(usize, String)>>,
    writer: TabWriter,
}

impl TablePrinter {
    fn new(wide: bool, namespaces: bool) -> Self {
        TablePrinter {
            wide,
            namespaces,
            header_printed: false,
            columns: None,
            writer: TabWriter::for_tables(),
        }
    }

    /// The laid-out lines of one Table (the header before the first row ever printed).
    fn print(&mut self, table: &Value) -> anyhow::Result<String> {
        if let Some(defs) = table.get("columnDefinitions").and_then(Value::as_array)
            && self.columns.is_none()
        {
            let columns = defs
                .iter()
                .enumerate()
                .filter(|(_, d)| self.wide || d["priority"].as_i64().unwrap_or(0) == 0)
                .map(|(i, d)| (i, d["name"].as_str().unwrap_or_default().to_uppercase()))
                .collect();
            self.columns = Some(columns);
        }
        let Some(columns) = &self.columns else {
            anyhow::bail!("the server sent a Table without column definitions");
        };
        let rows = table
            .get("rows")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if rows.is_empty() {
            return Ok(String::new());
        }
        if !self.header_printed {
            let mut header: Vec<&str> = columns.iter().map(|(_, n)| n.as_str()).collect();
            if self.namespaces {
                header.insert(0, "NAMESPACE");
            }
            self.writer.write(&format!("{}\n", header.join("\t")));
            self.header_printed = true;
        }
        for row in rows {
            let cells = row["cells"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            let mut line: Vec<String> = Vec::new();
            if self.namespaces {
                let ns = row["object"]["metadata"]["namespace"].as_str();
                line.push(ns.unwrap_or_default().to_string());
            }
            for (i, _) in columns {
                line.push(cell_text(cells.get(*i)));
            }
            self.writer.write(&format!("{}\n", line.join("\t")));
        }
        Ok(self.writer.flush())
    }
}

/// A cell as Go's `%v` prints it.
fn cell_text(cell: Option<&Value>) -> String {
    match cell {
        None | Some(Value::Null) => "<none>".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 48 item 12: an unknown resource is `get`'s limit, not the server's.
    #[test]
    fn i48_12_an_unknown_resource_names_gets_own_limits() {
        let e = collection("deploy").unwrap_err().to_string();
        assert!(
            e.contains("probelet get lists pods (pod, po) and events (event, ev) only")
                && e.contains("\"deploy\"")
                && e.contains("use kubectl"),
            "{e}"
        );
        assert!(!e.contains("doesn't have"), "{e}");
        assert_eq!(collection("po").unwrap(), "pods");
    }

    fn table(rows: Value) -> Value {
        json!({
            "columnDefinitions": [
                {"name": "Name", "priority": 0}, {"name": "Age", "priority": 0},
                {"name": "IP", "priority": 1}
            ],
            "rows": rows,
        })
    }

    #[test]
    fn narrow_wide_and_namespaced_tables() {
        let rows = json!([{"cells": ["web", "5s", "127.0.0.1"],
            "object": {"metadata": {"namespace": "default"}}}]);
        let mut p = TablePrinter::new(false, false);
        assert_eq!(
            p.print(&table(rows.clone())).unwrap(),
            "NAME   AGE\nweb    5s\n"
        );
        let mut p = TablePrinter::new(true, true);
        assert_eq!(
            p.print(&table(rows)).unwrap(),
            "NAMESPACE   NAME   AGE   IP\ndefault     web    5s    127.0.0.1\n"
        );
        // Watch rows come without column definitions and print without the header.
        let next = json!({"rows": [{"cells": ["web", "6s", "127.0.0.1"],
            "object": {"metadata": {"namespace": "default"}}}]});
        assert_eq!(
            p.print(&next).unwrap(),
            "default     web    6s    127.0.0.1\n"
        );
    }

    #[test]
    fn go_json_escapes_html_characters() {
        assert_eq!(
            to_go_json(&json!({"b": "<none>", "a": 1})),
            "{\n    \"a\": 1,\n    \"b\": \"\\u003cnone\\u003e\"\n}\n"
        );
    }
}
