//! JSON Schemas derived from the `kopt/1` types (schemars on kopt-model's
//! types, behind its `schema` feature): `kopt schema [NAME]`, the committed
//! copies under `docs/schema/`, and the MCP tools' output schemas.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

/// Every `kopt/1` document kopt writes, by the name `kopt schema` takes.
pub const DOCUMENTS: &[(&str, &str)] = &[
    (
        "diagnosis",
        "kopt analyze / profile / trace --format json, report.json",
    ),
    ("bench", "kopt bench --format json"),
    ("compare", "kopt compare --format json"),
    ("optimize", "kopt optimize --format json"),
    ("tune", "kopt tune --format json"),
    (
        "ranks",
        "kopt analyze RANK_FOLDER --format json, ranks.json",
    ),
];

/// The schema of the document `name`, None for an unknown name.
pub fn document(name: &str) -> Option<Value> {
    use kopt_model::{compare::CompareReport, BenchReport, Diagnosis};
    use kopt_model::{optimize::OptimizeReport, tune::TuneReport};
    Some(match name {
        "diagnosis" => output::<Diagnosis>(),
        "bench" => output::<BenchReport>(),
        "compare" => output::<CompareReport>(),
        "optimize" => output::<OptimizeReport>(),
        "tune" => output::<TuneReport>(),
        "ranks" => output::<kopt_model::RanksDiagnosis>(),
        _ => return None,
    })
}

/// The schema of what kopt writes as `T` (the serialize contract: a field
/// skipped when empty is optional). serde_json writes a non-finite float as
/// `null`, so every number may be null.
pub fn output<T: JsonSchema>() -> Value {
    let schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut v = serde_json::to_value(schema).unwrap_or(Value::Null);
    nullable_numbers(&mut v);
    v
}

/// A tool's output schema as `tools/list` sends it: the document's top
/// level (its fields, their JSON types, which are required), every nested
/// shape left open. The full schema (33 KB for a diagnosis, sent three
/// times) would fill an agent's budget for tools; it is the resource
/// `kopt://schema/NAME` instead, named in the description.
pub fn compact(full: &Value, name: &str) -> Value {
    let mut props = serde_json::Map::new();
    if let Some(p) = full.get("properties").and_then(Value::as_object) {
        for (key, prop) in p {
            let ty = prop.get("type").filter(|t| t.is_string() || t.is_array());
            props.insert(
                key.clone(),
                ty.map_or_else(
                    || serde_json::json!({}),
                    |t| serde_json::json!({ "type": t }),
                ),
            );
        }
    }
    let mut out = serde_json::json!({
        "type": "object",
        "description": format!("kopt/1 {name}: top-level fields; the full schema is the resource {}", resource_uri(name)),
        "properties": props,
    });
    if let Some(req) = full.get("required") {
        out["required"] = req.clone();
    }
    out
}

/// The resource that serves the full schema of the document `name`.
pub fn resource_uri(name: &str) -> String {
    format!("kopt://schema/{name}")
}

/// The schema of the arguments `T` parses (the deserialize contract).
pub fn input<T: JsonSchema>() -> Value {
    let schema = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut v = serde_json::to_value(schema).unwrap_or(Value::Null);
    // MCP takes 2020-12 as the default dialect, and the Rust type's name
    // says nothing to a client: both are bytes of every tools/list.
    if let Some(map) = v.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
    }
    v
}

fn nullable_numbers(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("number") {
                map.insert("type".into(), serde_json::json!(["number", "null"]));
            }
            for (_, child) in map.iter_mut() {
                nullable_numbers(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(nullable_numbers),
        _ => {}
    }
}

/// `kopt schema [NAME]`: one document's schema, or every one keyed by name.
pub fn print(name: Option<&str>) -> Result<String, kopt_engine::Error> {
    let value = match name {
        Some(n) => document(n).ok_or_else(|| {
            let names: Vec<&str> = DOCUMENTS.iter().map(|(n, _)| *n).collect();
            kopt_engine::Error::Usage(format!(
                "no kopt/1 document named {n:?}; the names are {}",
                names.join(", ")
            ))
        })?,
        None => Value::Object(
            DOCUMENTS
                .iter()
                .filter_map(|(n, _)| Some(((*n).to_string(), document(n)?)))
                .collect(),
        ),
    };
    let mut text = serde_json::to_string_pretty(&value)
        .map_err(|e| kopt_engine::Error::Output(e.to_string()))?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_has_an_object_schema() {
        for (name, _) in DOCUMENTS {
            let s = document(name).unwrap();
            assert_eq!(s["type"], "object", "{name}");
            assert!(s["properties"]["schema"].is_object(), "{name}");
        }
        assert!(document("nope").is_none());
    }

    #[test]
    fn numbers_may_be_null() {
        let s = document("bench").unwrap();
        assert_eq!(
            s["properties"]["threshold"]["type"],
            serde_json::json!(["number", "null"])
        );
    }
}
