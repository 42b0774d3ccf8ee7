// The data-heavy workload: a program reads a large tool result (50,000 rows, about 6 MB of JSON,
// made by `dataText` in peer-common.mjs and `data_text` in codemode's bench.rs, byte for byte
// the same), parses it, aggregates it with for…of, filters and sorts it, and serialises a
// projection. Plain JavaScript, the body of an async function; each phase is timed with
// Date.now() inside the engine, so every engine reports the same split.
const t0 = Date.now();
const text = await tools.read_file({ path: 'data.json' });
const t1 = Date.now();
const rows = JSON.parse(text);
const t2 = Date.now();
const regions = {};
let total = 0;
for (const row of rows) {
  total += row.amount;
  const region = regions[row.region] ?? (regions[row.region] = { count: 0, amount: 0 });
  region.count += 1;
  region.amount += row.amount;
}
const t3 = Date.now();
const top = rows
  .filter((row) => row.active && row.score > 50)
  .sort((a, b) => b.amount - a.amount || a.id - b.id)
  .slice(0, 10)
  .map((row) => row.id);
const t4 = Date.now();
const projection = JSON.stringify(rows.map((row) => ({ id: row.id, name: row.name, amount: row.amount })));
const t5 = Date.now();
return {
  phases: { transfer: t1 - t0, parse: t2 - t1, aggregate: t3 - t2, filterSort: t4 - t3, stringify: t5 - t4 },
  check: { rows: rows.length, total, regions: Object.keys(regions).length, top, projectionBytes: projection.length },
};
