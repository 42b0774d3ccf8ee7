//! The agreed behaviour of codemode's JSON: JavaScript's spelling, the depth limit, the
//! lossless rule, the memory count, and values of any depth on a small stack.

use codemode_json::*;
use serde_json::json;
use serde_json::{Map, Number, Value};

fn round_trip(text: &str) -> String {
    to_string(&parse(text.as_bytes()).expect("valid"))
}

#[test]
fn writes_like_json_stringify() {
    assert_eq!(
        round_trip(r#"{"a":[1,2.5,"x\"y"],"b":null}"#),
        r#"{"a":[1,2.5,"x\"y"],"b":null}"#
    );
    assert_eq!(round_trip("1e21"), "1e+21");
    assert_eq!(round_trip("123.0"), "123");
    assert_eq!(round_trip("0.000001"), "0.000001");
    assert_eq!(round_trip("1e-7"), "1e-7");
    assert_eq!(round_trip(r#""\u0001\b\f\n\r\t""#), r#""\u0001\b\f\n\r\t""#);
    assert_eq!(round_trip(r#""\u00e9\ud83d\ude00""#), "\"é😀\"");
}

#[test]
fn rejects_negative_zero_and_overflow() {
    assert_eq!(parse(b"-0"), Err(JsonError::Number(0)));
    assert_eq!(parse(b"[-0.0]"), Err(JsonError::Number(1)));
    assert!(parse(b"1e400").is_err());
    assert!(parse(b"0").is_ok());
    assert!(!is_lossless(&json!([-0.0])));
    assert!(is_lossless(&json!([0.0, 1, "x"])));
}

#[test]
fn rejects_malformed_text() {
    for bad in [
        "",
        "[",
        "[1,]",
        "{\"a\"}",
        "{\"a\":1,}",
        "tru",
        "01",
        "1.",
        "\"\\x\"",
        "[1] 2",
        "\"a\u{1}\"",
    ] {
        assert!(parse(bad.as_bytes()).is_err(), "{bad:?} should fail");
    }
}

#[test]
fn lone_surrogates_become_replacement_characters() {
    assert_eq!(parse(br#""a\ud800b""#).unwrap(), json!("a\u{FFFD}b"));
}

#[test]
fn deep_values_parse_write_and_drop_on_a_small_stack() {
    let depth = MAX_DEPTH;
    let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let value = parse(text.as_bytes()).expect("deep but allowed");
            assert!(is_lossless(&value));
            let written = to_string(&value);
            drop_deep(value);
            written == text
        })
        .expect("spawn");
    assert!(handle.join().expect("no overflow"));
}

#[test]
fn nesting_beyond_the_limit_is_refused() {
    let depth = MAX_DEPTH + 1;
    let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert_eq!(parse(text.as_bytes()), Err(JsonError::TooDeep));
}

#[test]
fn deep_clones_need_no_stack() {
    let mut v = json!("leaf");
    for i in 0..MAX_DEPTH {
        v = if i % 2 == 0 {
            Value::Array(vec![v, json!(1)])
        } else {
            let mut m = Map::new();
            m.insert("k".into(), v);
            m.insert("n".into(), Value::Null);
            Value::Object(m)
        };
    }
    let text = to_string(&v);
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let c = clone_deep(&v);
            let same = to_string(&c) == text;
            drop_deep(c);
            drop_deep(v);
            same
        })
        .expect("spawn");
    assert!(handle.join().expect("no overflow"));
    assert_eq!(
        clone_deep(&json!({"a": [1, {"b": "c"}], "d": []})),
        json!({"a": [1, {"b": "c"}], "d": []})
    );
}

#[test]
fn duplicate_keys_keep_the_last() {
    assert_eq!(parse(br#"{"a":1,"a":2}"#).unwrap(), json!({"a":2}));
}

#[test]
fn parsing_stops_at_its_heap_limit_and_the_count_matches() {
    let text = br#"{"a":[1,2,{"b":"xyz"}],"c":null}"#;
    let (value, used) = parse_within(text, usize::MAX).unwrap();
    assert_eq!(used, heap_bytes(&value));
    assert_eq!(
        parse_within(text, used - 1).unwrap_err(),
        JsonError::TooLarge(used - 1)
    );
    // Buffers on their way out (an object's entries while its map is built, the work
    // stack) count until they are freed: the limit applies to that peak.
    let peak = (used..used * 4)
        .find(|&max| parse_within(text, max).is_ok())
        .unwrap();
    assert!(peak > used);
    assert_eq!(parse_within(text, peak).unwrap().1, used);
    // A text of small numbers expands many times over into values.
    let numbers = format!("[{}0]", "0,".repeat(100_000));
    let (big, used) = parse_within(numbers.as_bytes(), usize::MAX).unwrap();
    assert!(
        used > 20 * numbers.len(),
        "{used} for {} bytes",
        numbers.len()
    );
    drop_deep(big);
}

#[test]
fn strings_are_allocated_once_at_their_escaped_length() {
    let (value, used) = parse_within(br#"["a\nb", "\u00e9"]"#, usize::MAX).unwrap();
    assert_eq!(value, json!(["a\nb", "é"]));
    let Value::Array(items) = &value else {
        unreachable!("an array was parsed")
    };
    assert_eq!(items[0].as_str().map(str::len), Some(3));
    assert_eq!(used, heap_bytes(&value));
}

#[test]
fn proto_key_is_data() {
    assert_eq!(
        round_trip(r#"{"__proto__":{"x":1}}"#),
        r#"{"__proto__":{"x":1}}"#
    );
}

#[test]
fn integers_beyond_two_to_the_53_are_the_doubles_a_program_holds() {
    // 2^53 + 1 is not a double: JavaScript holds 2^53, and writes it so.
    let above = json!(9_007_199_254_740_993_u64);
    assert_eq!(to_string(&above), "9007199254740992");
    assert_eq!(to_string_sorted(&above), "9007199254740992");
    assert_eq!(
        to_string(&json!(9_007_199_254_740_992_u64)),
        "9007199254740992"
    );
    assert_eq!(
        to_string(&json!(-9_007_199_254_740_993_i64)),
        "-9007199254740992"
    );
    assert_eq!(to_string(&json!(u64::MAX)), "18446744073709552000");
    // `===` on the doubles: both integers are 2^53 to a program.
    assert!(scalar_eq(&above, &json!(9_007_199_254_740_992_u64)));
    assert!(scalar_eq(&json!(1), &json!(1.0)));
    assert!(!scalar_eq(&json!(1), &json!("1")));
    assert!(is_lossless(&above));
}

#[test]
fn the_depth_limit_holds_for_every_check_and_parse() {
    let nest = |levels: usize| {
        let mut v = json!(1);
        for _ in 0..levels {
            v = Value::Array(vec![v]);
        }
        v
    };
    let at_limit = nest(MAX_DEPTH);
    let beyond = nest(MAX_DEPTH + 1);
    assert!(is_lossless(&at_limit));
    assert!(!is_lossless(&beyond));
    let text = to_string(&at_limit);
    assert_eq!(parse(text.as_bytes()).map(drop_deep), Ok(()));
    assert_eq!(
        parse(to_string(&beyond).as_bytes()).map(drop_deep),
        Err(JsonError::TooDeep)
    );
    assert_eq!(to_string_sorted(&at_limit), text);
    drop_deep(at_limit);
    drop_deep(beyond);
}

#[test]
fn negative_zero_is_the_only_lossy_number() {
    assert!(is_lossless(&json!({"a": [0.0, 1, -1.5, "x", null]})));
    assert!(!is_lossless(&json!({"a": [{"b": -0.0}]})));
    assert!(!is_lossless_number(
        &Number::from_f64(-0.0).unwrap_or_else(|| 0.into())
    ));
}

#[test]
fn sorted_output_orders_keys_by_utf16_at_every_depth() {
    let v = json!({"b": {"d": 1, "c": 2}, "a": [{"z": 0, "y": 1}]});
    assert_eq!(
        to_string_sorted(&v),
        r#"{"a":[{"y":1,"z":0}],"b":{"c":2,"d":1}}"#
    );
    // U+FF61 sorts after U+1F600 by code point, before it by UTF-16 code unit.
    let v = json!({"\u{ff61}": 1, "\u{1f600}": 2});
    assert_eq!(to_string_sorted(&v), "{\"\u{1f600}\":2,\"\u{ff61}\":1}");
}
