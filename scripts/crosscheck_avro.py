"""Read a streamidx tracking file with Apache Avro's Python library.

Usage: /usr/bin/python3 scripts/crosscheck_avro.py FILE.avro

Prints the records and fails unless every field of the stored Avro schema
carries an Iceberg field-id and at least one record decodes.
"""
import json
import sys

from avro.datafile import DataFileReader
from avro.io import DatumReader


def field_ids(node, out):
    if isinstance(node, list):
        for branch in node:
            field_ids(branch, out)
    elif isinstance(node, dict) and node.get("type") == "record":
        for f in node["fields"]:
            out.append((f["name"], f.get("field-id")))
            field_ids(f["type"], out)
    return out


with DataFileReader(open(sys.argv[1], "rb"), DatumReader()) as reader:
    ids = field_ids(json.loads(reader.get_meta("avro.schema")), [])
    missing = [n for n, i in ids if i is None]
    print(f"{len(ids)} fields in the Avro schema, without field-id: {missing}")
    records = list(reader)
    for rec in records:
        print(rec)
    if missing or not records:
        sys.exit(1)
    print(f"ok: {len(records)} tracking entries")
