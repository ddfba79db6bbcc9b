#!/usr/bin/python3
"""Write encoded Iceberg Kafka Connect control events to ingest/testdata/connect/.

No Kafka Connect sink runs here, so the samples are made from the published
schemas of apache/iceberg's kafka-connect-events module (Event, PayloadType,
StartCommit, DataWritten, DataComplete, CommitToTable, CommitComplete,
TableReference, TopicPartitionOffset) rendered the way Iceberg's
AvroSchemaUtil renders an Iceberg struct (records named after the Java
classes, field-id on every field, optional fields as ["null", T] unions,
uuid as a 16-byte fixed with logicalType uuid, timestamptz as long
timestamp-micros with adjust-to-utc), and framed as AvroEncoderUtil frames
them: b"aVR\\x01", the schema's length (4 bytes, big-endian), the schema
JSON, the datum. The datum is written by Debian's python3-avro, an encoder
independent of streamidx's decoder.

DataWritten carries data files of the sink's DataFile schema; the sample
abbreviates that record to a few of its fields (streamidx skips the payload).

Run: /usr/bin/python3 scripts/connect_samples.py (make connect-samples).
"""

import io
import json
import os
import struct
import sys
import uuid
from datetime import datetime, timedelta, timezone

import warnings

import avro.io
import avro.schema

PKG = "org.apache.iceberg.connect.events."
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ingest", "testdata", "connect")

UUID = {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}
TSTZ = {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}


def req(name, typ, fid):
    return {"name": name, "type": typ, "field-id": fid}


def opt(name, typ, fid):
    return {"name": name, "type": ["null", typ], "default": None, "field-id": fid}


def table_reference():
    return {
        "type": "record",
        "name": PKG + "TableReference",
        "fields": [
            req("catalog", "string", 10600),
            req("namespace", {"type": "array", "items": "string", "element-id": 10602}, 10601),
            req("name", "string", 10603),
        ],
    }


def payload_schema(kind):
    """The payload record of one PayloadType; uuid_fixed is defined by Event.id."""
    if kind == "StartCommit":
        fields = [req("commit_id", "uuid_fixed", 10200)]
    elif kind == "DataWritten":
        data_file = {
            "type": "record",
            "name": "org.apache.iceberg.GenericDataFile",
            "fields": [
                req("content", "int", 134),
                req("file_path", "string", 100),
                req("file_format", "string", 101),
                req("record_count", "long", 103),
                req("file_size_in_bytes", "long", 104),
            ],
        }
        fields = [
            req("commit_id", "uuid_fixed", 10300),
            req("table_reference", table_reference(), 10301),
            opt("data_files", {"type": "array", "items": data_file, "element-id": 10303}, 10302),
            opt("delete_files", {"type": "array", "items": "org.apache.iceberg.GenericDataFile", "element-id": 10305}, 10304),
        ]
    elif kind == "DataComplete":
        tpo = {
            "type": "record",
            "name": PKG + "TopicPartitionOffset",
            "fields": [
                req("topic", "string", 10700),
                req("partition", "int", 10701),
                opt("offset", "long", 10702),
                opt("timestamp", TSTZ, 10703),
            ],
        }
        fields = [
            req("commit_id", "uuid_fixed", 10100),
            opt("assignments", {"type": "array", "items": tpo, "element-id": 10102}, 10101),
        ]
    elif kind == "CommitToTable":
        fields = [
            req("commit_id", "uuid_fixed", 10400),
            req("table_reference", table_reference(), 10401),
            opt("snapshot_id", "long", 10402),
            opt("valid_through_ts", TSTZ, 10403),
        ]
    elif kind == "CommitComplete":
        fields = [
            req("commit_id", "uuid_fixed", 10000),
            opt("valid_through_ts", TSTZ, 10001),
        ]
    else:
        raise ValueError(kind)
    return {"type": "record", "name": PKG + kind, "fields": fields}


TYPES = {"StartCommit": 0, "DataWritten": 1, "DataComplete": 2, "CommitToTable": 3, "CommitComplete": 4}


def event_schema(kind):
    return {
        "type": "record",
        "name": PKG + "Event",
        "fields": [
            req("id", UUID, 10500),
            req("type", "int", 10501),
            req("timestamp", TSTZ, 10502),
            req("group_id", "string", 10503),
            req("payload", payload_schema(kind), 10504),
        ],
    }


def ts(us):
    """A timestamp-micros value as python3-avro wants it."""
    return None if us is None else datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)


def encode(kind, event_id, payload):
    schema_json = json.dumps(event_schema(kind), separators=(",", ":"))
    schema = avro.schema.parse(schema_json)
    datum = {
        "id": uuid.UUID(event_id).bytes,
        "type": TYPES[kind],
        "timestamp": ts(1764400000000000),
        "group_id": "cg-orders",
        "payload": payload,
    }
    buf = io.BytesIO()
    avro.io.DatumWriter(schema).write(datum, avro.io.BinaryEncoder(buf))
    raw = schema_json.encode("utf-8")
    return b"aVR\x01" + struct.pack(">i", len(raw)) + raw + buf.getvalue()


COMMIT = uuid.UUID("6f1f8a0e-8f4e-4c1e-9a39-2f8d1c5b7a10").bytes
TABLE = {"catalog": "default", "namespace": ["sales"], "name": "orders"}

SAMPLES = {
    "start_commit": ("StartCommit", "00000000-0000-4000-8000-000000000001", {"commit_id": COMMIT}),
    "data_written": ("DataWritten", "00000000-0000-4000-8000-000000000002", {
        "commit_id": COMMIT,
        "table_reference": TABLE,
        "data_files": [{"content": 0, "file_path": "s3://warehouse/sales/orders/data/00000-0.parquet",
                        "file_format": "PARQUET", "record_count": 42, "file_size_in_bytes": 4096}],
        "delete_files": None,
    }),
    "data_complete": ("DataComplete", "00000000-0000-4000-8000-000000000003", {
        "commit_id": COMMIT,
        "assignments": [
            {"topic": "orders-cdc", "partition": 0, "offset": 1042, "timestamp": ts(1764399999000000)},
            {"topic": "orders-cdc", "partition": 1, "offset": 977, "timestamp": None},
            {"topic": "orders-cdc", "partition": 2, "offset": None, "timestamp": None},
        ],
    }),
    "commit_to_table": ("CommitToTable", "00000000-0000-4000-8000-000000000004", {
        "commit_id": COMMIT, "table_reference": TABLE, "snapshot_id": 5171532812399482101,
        "valid_through_ts": ts(1764399999000000),
    }),
    "commit_to_table_no_snapshot": ("CommitToTable", "00000000-0000-4000-8000-000000000005", {
        "commit_id": COMMIT, "table_reference": TABLE, "snapshot_id": None, "valid_through_ts": None,
    }),
    "commit_complete": ("CommitComplete", "00000000-0000-4000-8000-000000000006", {
        "commit_id": COMMIT, "valid_through_ts": ts(1764399999000000),
    }),
}


def main():
    # python3-avro knows uuid only on strings; the sink puts it on a fixed, as here.
    warnings.simplefilter("ignore")
    os.makedirs(OUT, exist_ok=True)
    for name, (kind, event_id, payload) in SAMPLES.items():
        path = os.path.join(OUT, name + ".bin")
        with open(path, "wb") as f:
            f.write(encode(kind, event_id, payload))
        print("wrote", os.path.relpath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
