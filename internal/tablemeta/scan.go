package tablemeta

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/streamidx/streamidx/internal/jsonscan"
)

// scanMetadata reads the members of a table metadata file that a View
// holds and skips the rest. Like encoding/json, a member given twice
// counts once, the last time; unlike it, member names match exactly, as
// the spec spells them.
func scanMetadata(data []byte) (*metadataFile, error) {
	s := &jsonscan.Scanner{Data: data}
	m := &metadataFile{}
	// Keys and string values unescape into scratch buffers of their own:
	// a value read must not overwrite the key it is reported under.
	var keys, scratch []byte
	err := s.Members(&keys, func(k []byte) error {
		var err error
		switch string(k) {
		case "format-version":
			m.formatVersion, err = optInt(s)
		case "table-uuid":
			m.uuid, err = str(s, &scratch)
		case "location":
			var loc string
			if s.Peek() != jsonscan.Null {
				loc, err = str(s, &scratch)
				m.location = &loc
			} else {
				err = s.Literal("null")
			}
		case "properties":
			m.properties, err = strMap(s, &scratch)
		case "current-snapshot-id":
			m.currentSnapshotID, err = optInt(s)
		case "current-schema-id":
			m.currentSchemaID, err = optInt(s)
		case "snapshots":
			m.snapshots, err = snapshots(s, &scratch)
		case "schemas":
			err = decodeRaw(s, &m.schemas)
		case "schema":
			err = decodeRaw(s, &m.schema)
		default:
			_, err = s.Skip()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	if err == nil && !s.AtEnd() {
		err = s.Errorf("data after the object")
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

func snapshots(s *jsonscan.Scanner, scratch *[]byte) ([]snapshotFields, error) {
	if s.Peek() == jsonscan.Null {
		return nil, s.Literal("null")
	}
	var out []snapshotFields
	var keys []byte
	err := s.Array(func() error {
		var f snapshotFields
		err := s.Members(&keys, func(k []byte) error {
			var err error
			switch string(k) {
			case "snapshot-id":
				f.id, err = optInt(s)
			case "parent-snapshot-id":
				f.parentID, err = optInt(s)
			case "sequence-number":
				var n *int64
				if n, err = optInt(s); n != nil {
					f.sequenceNumber = *n
				}
			case "timestamp-ms":
				f.timestampMs, err = optInt(s)
			case "schema-id":
				f.schemaID, err = optInt(s)
			case "manifest-list":
				f.manifestList, err = str(s, scratch)
			default:
				_, err = s.Skip()
			}
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			return nil
		})
		out = append(out, f)
		return err
	})
	return out, err
}

// optInt reads an integer, or null as nil.
func optInt(s *jsonscan.Scanner) (*int64, error) {
	if s.Peek() == jsonscan.Null {
		return nil, s.Literal("null")
	}
	if s.Peek() != jsonscan.Number {
		return nil, s.Errorf("want an integer")
	}
	b, err := s.Number()
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s is not a 64-bit integer", b)
	}
	return &n, nil
}

// str reads a string, or null as "".
func str(s *jsonscan.Scanner, scratch *[]byte) (string, error) {
	switch s.Peek() {
	case jsonscan.Null:
		return "", s.Literal("null")
	case jsonscan.String:
	default:
		return "", s.Errorf("want a string")
	}
	v, sc, err := s.StringValue((*scratch)[:0])
	*scratch = sc
	return string(v), err
}

// strMap reads an object of strings.
func strMap(s *jsonscan.Scanner, scratch *[]byte) (map[string]string, error) {
	if s.Peek() == jsonscan.Null {
		return nil, s.Literal("null")
	}
	out := map[string]string{}
	var keys []byte
	err := s.Members(&keys, func(k []byte) error {
		v, err := str(s, scratch)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		out[string(k)] = v
		return nil
	})
	return out, err
}

// decodeRaw decodes the next value with encoding/json into dst: the
// schemas, few and nested, which iceberg-go's root package reads.
func decodeRaw(s *jsonscan.Scanner, dst any) error {
	raw, err := s.Skip()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, dst)
}
