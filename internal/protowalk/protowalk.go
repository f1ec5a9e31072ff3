// Package protowalk decodes a protobuf message of a Kubernetes type in
// pieces: the generated Unmarshal of those types merges into the receiver,
// so a message can be unmarshaled run by run, leaving out fields that the
// caller decodes its own way (shares, interns, or drops). The cache's
// encoded store and the watcher's decoder both walk messages so.
package protowalk

import (
	"encoding/binary"
	"errors"
)

// ErrMalformed is returned for a message that is not valid protobuf.
var ErrMalformed = errors.New("malformed protobuf")

// Unmarshaler is what the generated protobuf code of Kubernetes types
// provides. Unmarshal merges into the receiver: fields it reads are set,
// repeated fields and maps appended to, and the others left as they are.
type Unmarshaler interface {
	Unmarshal([]byte) error
}

// Wire types of the protobuf encoding Kubernetes types use (groups, 3
// and 4, are not).
const (
	WireVarint  = 0
	WireFixed64 = 1
	WireBytes   = 2
	WireFixed32 = 5
)

// Field reads the field at the start of b: its number, wire type, its
// payload (for length-delimited fields) and its total length in b. It is
// the one reader of protobuf fields the watcher's decoder and
// UnmarshalExcept share.
func Field(b []byte) (num uint64, typ int, payload []byte, n int, err error) {
	tag, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, 0, nil, 0, ErrMalformed
	}
	num, typ = tag>>3, int(tag&7)
	switch typ {
	case WireVarint:
		_, l := binary.Uvarint(b[k:])
		if l <= 0 {
			return 0, 0, nil, 0, ErrMalformed
		}
		return num, typ, nil, k + l, nil
	case WireFixed64:
		if len(b)-k < 8 {
			return 0, 0, nil, 0, ErrMalformed
		}
		return num, typ, nil, k + 8, nil
	case WireFixed32:
		if len(b)-k < 4 {
			return 0, 0, nil, 0, ErrMalformed
		}
		return num, typ, nil, k + 4, nil
	case WireBytes:
		size, l := binary.Uvarint(b[k:])
		if l <= 0 || size > uint64(len(b)-k-l) {
			return 0, 0, nil, 0, ErrMalformed
		}
		start := k + l
		return num, typ, b[start : start+int(size)], start + int(size), nil
	}
	return 0, 0, nil, 0, ErrMalformed
}

// UnmarshalExcept unmarshals msg into u, except the length-delimited fields
// that take takes: take gets each one's field number and the offset and
// length of its payload in msg, and reports whether it dealt with it; an
// error from take ends the walk and is returned. The runs of fields in
// between go to u.Unmarshal in order, so that u ends as a full Unmarshal
// would leave it but for the fields taken.
func UnmarshalExcept(u Unmarshaler, msg []byte, take func(num uint64, off, n int) (bool, error)) error {
	run := 0
	for i := 0; i < len(msg); {
		num, typ, payload, n, err := Field(msg[i:])
		if err != nil {
			return err
		}
		next := i + n
		if typ == WireBytes {
			off := next - len(payload)
			took, err := take(num, off, len(payload))
			if err != nil {
				return err
			}
			if took {
				if run < i {
					if err := u.Unmarshal(msg[run:i]); err != nil {
						return err
					}
				}
				run = next
			}
		}
		i = next
	}
	if run < len(msg) {
		return u.Unmarshal(msg[run:])
	}
	return nil
}
