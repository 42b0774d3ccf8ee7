//! Property tests: schema assertion and validation are total (never panic, any input), the
//! DSL always compiles into the subset, and `required` reports exactly the missing names.

use std::collections::BTreeSet;

use codemode_runtime::tools::schema::dsl::*;
use codemode_runtime::tools::schema::{assert_supported_schema, validate_value};
use codemode_runtime::tools::Schema;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(|f| json!(f)),
        Just(json!(-0.0)),
        "[a-c]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const KEYWORDS: [&str; 12] = [
    "type",
    "oneOf",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "description",
    "title",
    "default",
    "pattern",
];

/// Schema-shaped JSON: mostly the subset's vocabulary with plausible and implausible values.
fn schema_like() -> impl Strategy<Value = Value> {
    let type_name = prop::sample::select(vec![
        "object", "array", "string", "number", "integer", "boolean", "null", "tuple",
    ]);
    let leaf = prop_oneof![
        Just(json!({})),
        type_name.prop_map(|t| json!({"type": t})),
        json_value(),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        let keyword = prop::sample::select(KEYWORDS.to_vec());
        let entry = (
            keyword,
            prop_oneof![
                inner.clone(),
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map("[a-c]", inner.clone(), 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                prop::sample::select(vec!["object", "string", "integer", "a"])
                    .prop_map(|s| json!(s)),
                any::<bool>().prop_map(Value::Bool),
                json_value(),
            ],
        );
        prop::collection::vec(entry, 0..4).prop_map(|entries| {
            let mut map = Map::new();
            for (key, value) in entries {
                map.insert(key.to_owned(), value);
            }
            Value::Object(map)
        })
    })
}

fn value_spec() -> impl Strategy<Value = ValueSpec> {
    let leaf = prop_oneof![
        Just(ValueSpec::from(string())),
        Just(ValueSpec::from(number())),
        Just(ValueSpec::from(integer().enum_values([1i64, 2]))),
        Just(ValueSpec::from(boolean().constant(true))),
        Just(ValueSpec::from(null())),
        Just(json()),
        "[a-z]{1,3}".prop_map(|s| ValueSpec::from(
            string()
                .enum_values([s.clone()])
                .constant(s)
                .description("d")
        )),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(array),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| ValueSpec::from(one_of(a, b))),
            (
                any::<bool>(),
                prop::collection::vec(("[a-c]", inner, any::<bool>()), 0..3)
            )
                .prop_map(|(open, props)| {
                    let mut object = object(open);
                    for (name, spec, required) in props {
                        object = if required {
                            object.required(name, spec)
                        } else {
                            object.optional(name, spec)
                        };
                    }
                    ValueSpec::from(object)
                }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn assertion_and_validation_are_total(schema in schema_like(), value in json_value()) {
        if assert_supported_schema(&schema).is_ok() {
            let first = validate_value(&schema, &value, "value");
            prop_assert_eq!(first.clone(), validate_value(&schema, &value, "value"));
            prop_assert!(first.iter().all(|v| !v.is_empty()));
        }
    }

    #[test]
    fn validation_of_any_value_with_any_schema_never_panics(schema in json_value(), value in json_value()) {
        let _ = assert_supported_schema(&schema);
        let _ = validate_value(&schema, &value, "");
    }

    #[test]
    fn the_dsl_always_compiles_into_the_subset(spec in value_spec(), value in json_value()) {
        let schema = Schema::value(spec);
        prop_assert!(schema.is_ok(), "{:?}", schema.err());
        let _ = schema.unwrap().validate(&value, "value");
    }

    #[test]
    fn required_reports_exactly_the_missing_names(
        declared in prop::collection::btree_set("[a-e]", 0..5),
        required_mask in prop::collection::vec(any::<bool>(), 5),
        present in prop::collection::btree_set("[a-g]", 0..6),
    ) {
        let declared: Vec<String> = declared.into_iter().collect();
        let required: Vec<String> = declared.iter().zip(&required_mask).filter(|(_, r)| **r).map(|(n, _)| n.clone()).collect();
        let mut params = Parameters::new();
        for name in &declared {
            params = if required.contains(name) { params.required(name.clone(), json()) } else { params.optional(name.clone(), json()) };
        }
        let schema = Schema::parameters(params).unwrap();
        let value = Value::Object(present.iter().map(|k| (k.clone(), json!(1))).collect());
        let missing: BTreeSet<String> = schema
            .validate(&value, "")
            .into_iter()
            .filter_map(|v| v.strip_prefix("missing required property \"").map(|s| s.trim_end_matches('"').to_owned()))
            .collect();
        let expected: BTreeSet<String> = required.iter().filter(|r| !present.contains(*r)).cloned().collect();
        prop_assert_eq!(missing, expected);
        // With nothing missing and an open root, the arguments are valid.
        if required.iter().all(|r| present.contains(r)) {
            prop_assert!(schema.validate(&value, "").is_empty());
        }
    }
}
