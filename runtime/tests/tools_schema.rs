//! The enforced subset, its validator and the DSL (ported from the reference's json-schema and
//! schema suites), plus foreign schemas.

use codemode_runtime::tools::schema::dsl::*;
use codemode_runtime::tools::schema::{assert_supported_schema, validate_value};
use codemode_runtime::tools::Schema;
use serde_json::{json, Value};

/// `json!` with an interpolated value re-serializes it recursively; build deep values by move.
fn nest_array(inner: Value) -> Value {
    Value::Array(vec![inner])
}

fn nest_object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Takes a value apart without recursion (`Value`'s own drop recurses once per level, which a
/// debug build cannot afford at 5,000 levels of maps on a 2 MiB stack).
fn dispose(value: Value) {
    let mut pending = vec![value];
    while let Some(next) = pending.pop() {
        match next {
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

fn violations_of(schema: Value) -> Vec<String> {
    match assert_supported_schema(&schema) {
        Ok(()) => Vec::new(),
        Err(error) => error.violations().to_vec(),
    }
}

fn check(schema: Value, value: Value) -> Vec<String> {
    assert_supported_schema(&schema).expect("schema is in the subset");
    validate_value(&schema, &value, "value")
}

#[test]
fn accepts_every_json_root_and_every_supported_node() {
    for schema in [
        json!({}),
        json!({"type": "string"}),
        json!({"type": "number"}),
        json!({"type": "integer"}),
        json!({"type": "boolean"}),
        json!({"type": "null"}),
        json!({"type": "array", "items": {"type": "string"}}),
        json!({"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": false}),
        json!({"oneOf": [{"type": "string"}, {"type": "null"}], "description": "d"}),
    ] {
        assert_eq!(
            violations_of(schema.clone()),
            Vec::<String>::new(),
            "{schema}"
        );
    }
}

#[test]
fn rejects_non_schema_nodes_unknown_types_and_type_arrays() {
    assert_eq!(
        violations_of(json!(null)),
        ["schema must be a schema object"]
    );
    assert_eq!(violations_of(json!([])), ["schema must be a schema object"]);
    assert_eq!(
        violations_of(json!("no")),
        ["schema must be a schema object"]
    );
    assert!(violations_of(json!({"type": "tuple"}))[0].contains("type must be one of"));
    assert_eq!(
        violations_of(json!({"type": ["string", "null"]})),
        ["schema.type must be a single type string (type arrays are not supported)"]
    );
}

#[test]
fn enforces_one_of_vocabulary_and_its_minimum_branch_count() {
    let too_few = ["schema.oneOf must be an array of at least two schemas"];
    assert_eq!(violations_of(json!({"oneOf": []})), too_few);
    assert_eq!(violations_of(json!({"oneOf": [{}]})), too_few);
    assert_eq!(violations_of(json!({"oneOf": "x"})), too_few);
    assert_eq!(
        violations_of(json!({"type": "string", "oneOf": [{}, {}]})),
        ["schema cannot declare both type and oneOf"]
    );
    assert_eq!(
        violations_of(json!({"oneOf": [{"type": "string"}, {"type": "number"}], "items": {}})),
        ["schema.items is not supported beside oneOf"]
    );
    assert!(
        violations_of(json!({"oneOf": [{"type": "string"}, {"type": "weird"}]}))[0]
            .contains("schema.oneOf[1].type")
    );
}

#[test]
fn rejects_unknown_and_misplaced_keywords() {
    for keyword in [
        "anyOf",
        "allOf",
        "not",
        "pattern",
        "minimum",
        "maxLength",
        "$ref",
    ] {
        let mut schema = json!({"type": "object"});
        schema[keyword] = json!([]);
        assert!(violations_of(schema)[0]
            .contains(&format!("schema.{keyword} is not a supported keyword")));
    }
    assert_eq!(
        violations_of(json!({"type": "object", "pattern": "x"})),
        ["schema.pattern is not a supported keyword (subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations)"]
    );
    assert_eq!(
        violations_of(json!({"type": "object", "items": {}})),
        ["schema.items is not supported on type \"object\""]
    );
    assert_eq!(
        violations_of(json!({"type": "array", "properties": {}})),
        ["schema.properties is not supported on type \"array\""]
    );
    assert_eq!(
        violations_of(json!({"type": "object", "enum": ["x"]})),
        ["schema.enum is not supported on type \"object\""]
    );
    assert_eq!(
        violations_of(json!({"type": "array", "const": null})),
        ["schema.const is not supported on type \"array\""]
    );
    assert_eq!(
        violations_of(
            json!({"properties": {}, "required": [], "additionalProperties": true, "items": {}, "enum": [], "const": null})
        ),
        [
            "schema.properties requires type or oneOf",
            "schema.required requires type or oneOf",
            "schema.additionalProperties requires type or oneOf",
            "schema.items requires type or oneOf",
            "schema.enum requires type or oneOf",
            "schema.const requires type or oneOf",
        ]
    );
}

#[test]
fn reports_every_independent_schema_violation() {
    let schema = json!({
        "type": "object",
        "pattern": "x",
        "properties": {"a": {"type": "weird"}, "b": {"type": "string", "minimum": 1}},
    });
    assert_eq!(violations_of(schema).len(), 3);
}

#[test]
fn validates_object_properties_required_names_and_openness() {
    assert_eq!(
        violations_of(json!({"type": "object", "properties": []})),
        ["schema.properties must be an object of schemas"]
    );
    assert_eq!(
        violations_of(json!({"type": "object", "properties": {"a": "x"}})),
        ["schema.properties.a must be a schema object"]
    );
    assert_eq!(
        violations_of(json!({"type": "object", "required": "a"})),
        ["schema.required must be an array of strings"]
    );
    assert_eq!(
        violations_of(json!({"type": "object", "required": [1]})),
        ["schema.required must be an array of strings"]
    );
    assert_eq!(
        violations_of(json!({"type": "object", "properties": {}, "required": ["missing"]})),
        ["schema.required names \"missing\" which is not in properties"]
    );
    assert_eq!(
        violations_of(json!({"type": "object", "additionalProperties": "yes"})),
        ["schema.additionalProperties must be a boolean"]
    );
    assert_eq!(
        violations_of(json!({"type": "object", "properties": {}, "required": ["toString"]})),
        ["schema.required names \"toString\" which is not in properties"]
    );
}

#[test]
fn requires_type_correct_scalar_enum_and_const_values() {
    for schema in [
        json!({"type": "string", "enum": ["a"], "const": "a"}),
        json!({"type": "number", "enum": [1.5], "const": 1.5}),
        json!({"type": "integer", "enum": [1], "const": 1}),
        json!({"type": "boolean", "enum": [true], "const": true}),
        json!({"type": "null", "enum": [null], "const": null}),
    ] {
        assert!(violations_of(schema).is_empty());
    }
    assert_eq!(
        violations_of(json!({"type": "string", "enum": []})),
        ["schema.enum must be a non-empty array of string values"]
    );
    assert_eq!(
        violations_of(json!({"type": "number", "enum": ["1"]})),
        ["schema.enum must be a non-empty array of number values"]
    );
    assert_eq!(
        violations_of(json!({"type": "integer", "enum": [1.5]})),
        ["schema.enum must be a non-empty array of integer values"]
    );
    assert_eq!(
        violations_of(json!({"type": "number", "const": -0.0})),
        ["schema.const must be a number value"]
    );
    assert_eq!(
        violations_of(json!({"type": "boolean", "const": 1})),
        ["schema.const must be a boolean value"]
    );
    assert_eq!(
        violations_of(json!({"type": "string", "enum": ["a"], "const": "b"})),
        ["schema.const must be one of schema.enum when both are declared"]
    );
}

#[test]
fn validates_annotation_types_and_lossless_payloads() {
    assert_eq!(
        violations_of(json!({"description": 1})),
        ["schema.description must be a string"]
    );
    assert_eq!(
        violations_of(json!({"title": 1})),
        ["schema.title must be a string"]
    );
    assert_eq!(
        violations_of(json!({"default": {"x": -0.0}})),
        ["schema.default annotation must be lossless JSON data"]
    );
    assert_eq!(
        violations_of(json!({"examples": [-0.0]})),
        ["schema.examples annotation must be lossless JSON data"]
    );
}

fn deep_union(depth: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 0..depth {
        schema = nest_object(vec![(
            "oneOf",
            Value::Array(vec![schema, json!({"type": "null"})]),
        )]);
    }
    schema
}

#[test]
fn asserts_deeply_nested_raw_unions_without_recursion() {
    let schema = deep_union(5_000);
    assert!(assert_supported_schema(&schema).is_ok());
    dispose(schema);
}

#[test]
fn validates_scalar_array_object_and_null_roots() {
    assert!(check(json!({"type": "string"}), json!("x")).is_empty());
    assert!(check(json!({"type": "number"}), json!(1.5)).is_empty());
    assert!(check(json!({"type": "integer"}), json!(2)).is_empty());
    assert!(check(json!({"type": "integer"}), json!(2.0)).is_empty());
    assert!(check(json!({"type": "boolean"}), json!(true)).is_empty());
    assert!(check(json!({"type": "null"}), json!(null)).is_empty());
    assert!(check(
        json!({"type": "array", "items": {"type": "string"}}),
        json!(["x"])
    )
    .is_empty());
    assert!(check(json!({"type": "object"}), json!({"x": 1})).is_empty());
}

#[test]
fn rejects_wrong_scalar_types_and_lossy_numbers() {
    assert_eq!(
        check(json!({"type": "string"}), json!(1)),
        ["\"value\" must be a string"]
    );
    assert_eq!(
        check(json!({"type": "number"}), json!("1")),
        ["\"value\" must be a number"]
    );
    assert_eq!(
        check(json!({"type": "number"}), json!(-0.0)),
        ["\"value\" must be a finite JSON number"]
    );
    assert_eq!(
        check(json!({"type": "integer"}), json!(1.5)),
        ["\"value\" must be an integer"]
    );
    assert_eq!(
        check(json!({"type": "boolean"}), json!("true")),
        ["\"value\" must be a boolean"]
    );
    assert_eq!(
        check(json!({"type": "null"}), json!(0)),
        ["\"value\" must be null"]
    );
}

#[test]
fn enforces_scalar_enum_and_const_together() {
    let schema = json!({"type": "string", "enum": ["a", "b"], "const": "a"});
    assert!(check(schema.clone(), json!("a")).is_empty());
    assert_eq!(
        check(schema.clone(), json!("c")),
        ["\"value\" must be one of [\"a\",\"b\"]"]
    );
    assert_eq!(check(schema, json!("b")), ["\"value\" must be \"a\""]);
    // Numbers compare by value and print as JavaScript prints them.
    let numbers = json!({"type": "number", "enum": [1.0, 2.5]});
    assert!(check(numbers.clone(), json!(1)).is_empty());
    assert_eq!(
        check(numbers, json!(3)),
        ["\"value\" must be one of [1,2.5]"]
    );
}

#[test]
fn validates_object_requiredness_nested_values_and_raw_open_defaults() {
    let open = json!({
        "type": "object",
        "properties": {
            "file": {"type": "string"},
            "nested": {
                "type": "object",
                "properties": {"line": {"type": "integer"}},
                "required": ["line"],
                "additionalProperties": false,
            },
        },
        "required": ["file"],
    });
    assert!(check(
        open.clone(),
        json!({"file": "a", "extra": [1], "nested": {"line": 2}})
    )
    .is_empty());
    assert_eq!(
        check(open.clone(), json!({"nested": {"line": 1}})),
        ["missing required property \"value.file\""]
    );
    assert_eq!(
        check(open.clone(), json!({"file": 1, "nested": {}})),
        [
            "\"value.file\" must be a string",
            "missing required property \"value.nested.line\""
        ]
    );
    assert_eq!(
        check(
            open.clone(),
            json!({"file": "a", "nested": {"line": 1, "extra": true}})
        ),
        ["\"value.nested.extra\" is not a declared property (additionalProperties: false)"]
    );
    assert_eq!(check(open, json!("x")), ["\"value\" must be an object"]);
}

#[test]
fn rejects_lossy_containers_that_pass_every_declared_check() {
    assert_eq!(
        check(json!({"type": "object"}), json!({"x": -0.0})),
        ["\"value\" must be a lossless JSON object"]
    );
    assert_eq!(
        check(json!({"type": "array"}), json!([-0.0])),
        ["\"value\" must be a dense lossless JSON array"]
    );
}

#[test]
fn validates_dense_arrays_per_index() {
    let schema = json!({"type": "array", "items": {"type": "integer"}});
    assert!(check(schema.clone(), json!([1, 2])).is_empty());
    assert_eq!(
        check(schema.clone(), json!([1, 1.5])),
        ["\"value[1]\" must be an integer"]
    );
    assert_eq!(check(schema, json!("x")), ["\"value\" must be an array"]);
}

#[test]
fn validates_exact_one_one_of_semantics_including_overlap() {
    let disjoint = json!({"oneOf": [{"type": "string"}, {"type": "number"}]});
    assert!(check(disjoint.clone(), json!("x")).is_empty());
    assert_eq!(
        check(disjoint, json!(null)),
        ["\"value\" must match exactly one oneOf branch (matched 0)"]
    );
    let overlap = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
    assert_eq!(
        check(overlap.clone(), json!(1)),
        ["\"value\" must match exactly one oneOf branch (matched 2)"]
    );
    assert!(check(overlap, json!(1.5)).is_empty());
}

#[test]
fn validates_deeply_nested_exact_one_unions_without_recursion() {
    let schema = deep_union(5_000);
    assert_supported_schema(&schema).expect("in the subset");
    assert!(validate_value(&schema, &json!("leaf"), "value").is_empty());
    assert_eq!(
        validate_value(&schema, &json!(42), "value"),
        ["\"value\" must match exactly one oneOf branch (matched 0)"]
    );
    dispose(schema);
}

#[test]
fn an_unconstrained_schema_accepts_only_lossless_values() {
    for value in [
        json!(null),
        json!(true),
        json!(1),
        json!("x"),
        json!([1]),
        json!({"x": null}),
    ] {
        assert!(check(json!({}), value).is_empty());
    }
    assert_eq!(
        check(json!({}), json!(-0.0)),
        ["\"value\" must be a lossless JSON value"]
    );
}

#[test]
fn argument_paths_start_at_the_implicit_root() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}}, "required": ["x"]});
    assert_eq!(
        validate_value(&schema, &json!({"a": {}}), ""),
        [
            "missing required property \"x\"",
            "missing required property \"a.b\""
        ]
    );
    assert_eq!(
        validate_value(&schema, &json!(1), ""),
        ["\"arguments\" must be an object"]
    );
}

#[test]
fn validates_a_five_thousand_deep_value_without_recursion() {
    let mut schema = json!({"type": "string"});
    let mut value = json!("leaf");
    for _ in 0..5_000 {
        schema = nest_object(vec![
            ("type", json!("object")),
            ("properties", nest_object(vec![("a", schema)])),
            ("required", json!(["a"])),
            ("additionalProperties", json!(false)),
        ]);
        value = nest_object(vec![("a", value)]);
    }
    assert!(assert_supported_schema(&schema).is_ok());
    assert!(validate_value(&schema, &value, "value").is_empty());
    let mut bad = json!(1);
    for _ in 0..5_000 {
        bad = nest_object(vec![("a", bad)]);
    }
    let violations = validate_value(&schema, &bad, "");
    assert_eq!(violations.len(), 1);
    assert!(violations[0].ends_with("\" must be a string"));
    // An unconstrained schema walks a deep value too.
    assert!(validate_value(&json!({}), &bad, "value").is_empty());
    dispose(schema);
    dispose(value);
    dispose(bad);
}

#[test]
fn dsl_compiles_parameters_to_the_implicit_open_root() {
    let params = Parameters::new()
        .required("path", string().description("Absolute file path"))
        .optional("offset", number())
        .optional("mode", string().enum_values(["a", "b"]).constant("a"))
        .optional("flags", array(boolean()))
        .optional(
            "opts",
            object(false).required("deep", integer()).title("Options"),
        )
        .optional("any", json().default_value(json!({"k": 1})))
        .optional("either", one_of(string(), null()).or(integer()));
    let schema = Schema::parameters(params).expect("compiles");
    assert_eq!(
        schema.json(),
        &json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute file path"},
                "offset": {"type": "number"},
                "mode": {"type": "string", "enum": ["a", "b"], "const": "a"},
                "flags": {"type": "array", "items": {"type": "boolean"}},
                "opts": {"type": "object", "additionalProperties": false, "title": "Options",
                         "properties": {"deep": {"type": "integer"}}, "required": ["deep"]},
                "any": {"default": {"k": 1}},
                "either": {"oneOf": [{"type": "string"}, {"type": "null"}, {"type": "integer"}]},
            },
            "required": ["path"],
        })
    );
    assert!(schema.json().get("additionalProperties").is_none());
    assert_eq!(
        schema.validate(&json!({}), ""),
        ["missing required property \"path\""]
    );
    assert!(schema
        .validate(&json!({"path": "/x", "extra": 1}), "")
        .is_empty());
}

#[test]
fn dsl_rejects_what_the_types_cannot() {
    let error = Schema::value(string().enum_values(Vec::<String>::new())).unwrap_err();
    assert_eq!(
        error.to_string(),
        "unsupported JSON schema: schema.enum must be a non-empty array of string values"
    );
    assert_eq!(error.code(), "UNSUPPORTED_SCHEMA");
    let error = Schema::value(number().constant(f64::NAN)).unwrap_err();
    assert_eq!(error.violations(), ["schema.const must be a number value"]);
    let error = Schema::value(string().enum_values(["a"]).constant("b")).unwrap_err();
    assert_eq!(
        error.violations(),
        ["schema.const must be one of schema.enum when both are declared"]
    );
    let error = Schema::value(json().default_value(json!(-0.0))).unwrap_err();
    assert_eq!(
        error.violations(),
        ["schema.default annotation must be lossless JSON data"]
    );
}

#[test]
fn dsl_compiles_a_five_thousand_deep_spec_iteratively() {
    let mut spec: ValueSpec = string().into();
    for _ in 0..5_000 {
        spec = array(spec);
    }
    let schema = Schema::value(spec).expect("compiles");
    let mut value = json!("x");
    for _ in 0..5_000 {
        value = nest_array(value);
    }
    assert!(schema.validate(&value, "value").is_empty());
    dispose(value);
    // The compiled schema is 5,000 levels of maps; dropping it must not recurse either.
    drop(schema);
}

#[test]
fn raw_schemas_outside_the_subset_are_refused_with_every_violation() {
    let error = Schema::raw(
        json!({"type": "object", "properties": {"a": {"anyOf": []}}, "additionalProperties": 1}),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "unsupported JSON schema: schema.properties.a.anyOf is not a supported keyword (subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations); schema.additionalProperties must be a boolean"
    );
}

#[test]
fn foreign_schemas_validate_full_json_schema_in_the_same_style() {
    let schema = Schema::foreign(json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 1, "maximum": 3},
            "name": {"$ref": "#/$defs/name"},
            "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        },
        "required": ["count"],
        "additionalProperties": false,
        "$defs": {"name": {"type": "string", "pattern": "^[a-z]+$"}},
    }))
    .expect("full JSON Schema is accepted");
    assert!(schema.is_foreign());
    assert!(schema
        .validate(&json!({"count": 2, "name": "abc", "tags": ["x", null]}), "")
        .is_empty());
    assert_eq!(
        schema.validate(&json!({}), ""),
        ["missing required property \"count\""]
    );
    assert_eq!(
        schema.validate(&json!({"count": "2"}), ""),
        ["\"count\" must be an integer"]
    );
    assert_eq!(
        schema.validate(&json!({"count": 1, "zzz": 1}), ""),
        ["\"zzz\" is not a declared property (additionalProperties: false)"]
    );
    let over = schema.validate(&json!({"count": 9}), "");
    assert_eq!(over.len(), 1);
    assert!(over[0].starts_with("\"count\" "), "{over:?}");
    let tagged = schema.validate(&json!({"count": 1, "tags": ["x", 1]}), "");
    assert_eq!(tagged.len(), 1);
    assert!(tagged[0].starts_with("\"tags[1]\" "), "{tagged:?}");
    let named = schema.validate(&json!({"count": 1, "name": "ABC"}), "");
    assert!(named[0].starts_with("\"name\" "), "{named:?}");
}

#[test]
fn foreign_schemas_refuse_invalid_and_too_deep_documents() {
    assert!(Schema::foreign(json!({"type": 12})).is_err());
    let mut deep = json!({"type": "string"});
    for _ in 0..100 {
        deep = nest_object(vec![("type", json!("array")), ("items", deep)]);
    }
    let error = Schema::foreign(deep).unwrap_err();
    assert!(error
        .to_string()
        .starts_with("unsupported JSON schema: schema is nested deeper than"));
    let open = Schema::foreign(json!({"type": "array"})).expect("valid");
    let mut value = json!(1);
    for _ in 0..5_000 {
        value = nest_array(value);
    }
    assert_eq!(
        open.validate(&value, "value"),
        ["\"value\" is nested deeper than 256 levels"]
    );
    dispose(value);
}

#[test]
fn foreign_schemas_at_the_depth_limit_compile_and_validate_on_a_test_thread() {
    use codemode_runtime::tools::schema::FOREIGN_SCHEMA_DEPTH_LIMIT;
    let mut schema = json!({"type": "integer", "minimum": 0});
    let mut value = json!(-1);
    for _ in 0..FOREIGN_SCHEMA_DEPTH_LIMIT - 1 {
        schema = nest_object(vec![("type", json!("array")), ("items", schema)]);
        value = nest_array(value);
    }
    let compiled = Schema::foreign(schema).expect("within the limit");
    let violations = compiled.validate(&value, "value");
    assert_eq!(violations.len(), 1);
    assert!(violations[0].starts_with(&format!(
        "\"value{}\" ",
        "[0]".repeat(FOREIGN_SCHEMA_DEPTH_LIMIT - 1)
    )));
}

#[test]
fn dsl_output_serializes_keys_in_the_reference_order() {
    let schema = Schema::parameters(
        Parameters::new()
            .required("path", string().description("p").enum_values(["a"]))
            .optional(
                "opts",
                object(true).description("o").optional("x", integer()),
            )
            .optional("u", one_of(string(), null()).title("t")),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(schema.json()).unwrap(),
        r#"{"type":"object","properties":{"path":{"type":"string","description":"p","enum":["a"]},"opts":{"type":"object","description":"o","additionalProperties":true,"properties":{"x":{"type":"integer"}}},"u":{"oneOf":[{"type":"string"},{"type":"null"}],"title":"t"}},"required":["path"]}"#
    );
}
