// The compute-heavy workload every bench runs: the body of an async function (it ends in
// `return`), plain JavaScript so that TypeScript stripping, Node, QuickJS and native Boa all run
// the same text. Object allocation, JSON both ways, array methods and string building.
let acc = 0;
for (let round = 0; round < 40; round++) {
  const rows = Array.from({ length: 500 }, (_, i) => ({ id: i, name: 'row' + i, tags: ['a', 'b', String(i % 7)] }));
  const text = JSON.stringify(rows);
  const back = JSON.parse(text);
  acc += back.filter((r) => r.id % 3 === 0).map((r) => r.name.length).reduce((a, b) => a + b, 0);
}
let fib = [0, 1];
for (let i = 2; i < 5000; i++) fib.push((fib[i - 1] + fib[i - 2]) % 1000003);
acc += fib[4999];
return acc;
