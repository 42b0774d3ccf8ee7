//! The shortcuts the sandbox's Boa takes (`guest/patches/`): object literals adding keys,
//! `JSON.stringify` reading plain objects by shape, array iterators stepped without result
//! objects, arrays filled in order, `[[Get]]` of own data properties, property additions replayed
//! from a set site, compound assignment to a register in place, loop literals loaded once, class
//! constructors without a function environment, `new` of a class taking its prototype from
//! the home object, concatenation appending in place, `push` onto dense elements, binary
//! operators parsed by precedence climbing, `**` and postfix `++`/`--` as the language
//! defines them, `new Set`/`new Map` adding without a call per value, property reads and writes
//! through the inline cache, `Map`/`Set` keys hashed with Fx, string iterators stepped
//! without result objects, built-ins entered one way, equality without clones and names read
//! through their compiled locators, writes by key to existing properties, strings joined with
//! integers, `Map`/`Set` calls and `push` answered without entering the built-in, captured
//! bindings read with one walk down the environment chain, and a call's last argument read from
//! its register by the call, values cloned and dropped by a test of their tag inline, and `++`
//! and `--` on integers read in place, agree
//! with Node on `fixtures/fast-paths.js`: each shortcut beside the cases that must leave it
//! (repeated and index keys, accessors, objects changed while they are serialised, replaced
//! iterator methods, getters that step the iterator being stepped, proxies, typed arrays,
//! generators, inherited and exotic reads, right-hand sides that write the binding, `const`s,
//! constructors whose arrow functions capture `this`, `new.target`, `super`, `arguments` or
//! direct eval, another `new.target`, strings kept or appended to again, elements and setters on
//! the prototypes, frozen arrays and read-only lengths, every pair of binary operators, a slash
//! as division or regular expression, `#x in`, the syntax errors of the operator levels,
//! replaced, subclassed and throwing adders, shapes that die between reads, prototypes that
//! gain and lose properties, built-in objects changed in place, getters and setters that change
//! the object, array lengths, writes through `super`, keys of every kind, surrogates, iterators
//! also stepped by hand, arrays that change while they are iterated, every kind of value
//! compared with every other, built-ins called with many arguments from inside each other,
//! array iterators over array-likes, `arguments` and proxies, and names read through `with`,
//! direct eval and deleted bindings, receivers, keys and arrays the new shortcuts must leave,
//! captured bindings read before initialisation, under `with` and after an `eval` or a
//! `delete`, last arguments that assign, are calls or spreads, or run getters, and `++` and
//! `--` on floats, -0, the ends of i32, strings, bigints, objects, null and undefined). One case
//! changes values built before the run (the global object and built-in prototypes), which the
//! run's own heap (`guest/src/heap.rs`) copies out when they are resized and never frees in
//! place.

use codemode_e2e::fixture_cases_beside_node;

#[tokio::test]
async fn the_fast_paths_agree_with_node() {
    let (node, ours) = fixture_cases_beside_node("fast-paths.js", 190).await;
    for (node, ours) in node.iter().zip(&ours) {
        assert_eq!(ours, node, "case {}", node[0]);
    }
}
