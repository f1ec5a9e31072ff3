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
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// UnmarshalExcept unmarshals msg into u, except the length-delimited fields
// that take takes: take gets each one's field number and the offset and
// length of its payload in msg, and reports whether it dealt with it; an
// error from take ends the walk and is returned. The runs of fields in
// between go to u.Unmarshal in order, so that u ends as a full Unmarshal
// would leave it but for the fields taken.
func UnmarshalExcept(u Unmarshaler, msg []byte, take func(num uint64, off, n int) (bool, error)) error {
	run := 0
	for i := 0; i < len(msg); {
		tag, k := binary.Uvarint(msg[i:])
		if k <= 0 {
			return ErrMalformed
		}
		next := i + k
		switch tag & 7 {
		case wireVarint:
			_, k := binary.Uvarint(msg[next:])
			if k <= 0 {
				return ErrMalformed
			}
			next += k
		case wireFixed64:
			next += 8
		case wireFixed32:
			next += 4
		case wireBytes:
			size, k := binary.Uvarint(msg[next:])
			if k <= 0 || size > uint64(len(msg)-next-k) {
				return ErrMalformed
			}
			off := next + k
			next = off + int(size)
			took, err := take(tag>>3, off, int(size))
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
		default:
			return ErrMalformed
		}
		if next > len(msg) {
			return ErrMalformed
		}
		i = next
	}
	if run < len(msg) {
		return u.Unmarshal(msg[run:])
	}
	return nil
}
