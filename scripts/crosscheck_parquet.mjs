// Read a streamidx range file with DuckDB (no code shared with streamidx).
// Usage: node scripts/crosscheck_parquet.mjs FILE.parquet
// Prints each column's field_id and types, then every row; fails unless every
// column has a field_id and the rows decode.
import { DuckDBInstance } from '@duckdb/node-api';

const file = process.argv[2];
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
const schema = await con.runAndReadAll(
  `SELECT name, type, field_id, logical_type FROM parquet_schema('${file}') WHERE name <> 'schema'`);
const cols = schema.getRowObjects();
console.table(cols);
const rows = await con.runAndReadAll(`SELECT * FROM read_parquet('${file}')`);
console.log(rows.getRowObjectsJson());
const missing = cols.filter((c) => c.field_id === null);
if (missing.length > 0 || rows.currentRowCount === 0) {
  console.error('missing field ids:', missing.map((c) => c.name));
  process.exit(1);
}
console.log(`ok: ${cols.length} columns with field ids, ${rows.currentRowCount} rows`);
