package taskdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
)

// The log makes a commit durable with one write and one fsync, however many keys and
// pages the commit changes: each commit appends one record holding the final value (or
// removal) of every key it wrote. A checkpoint writes the writes in memory into the bbolt
// file in one transaction, records the log epoch it covers in the file, and empties the
// log; Open lays the records of later epochs over the file again. Records hold values,
// not operations, so replaying one twice changes nothing.
//
// A record: length (4 bytes, of what follows the checksum), CRC-32C of what follows it
// (4), epoch (8), then the writes, each a bucket (1), a kind (1: put, 2: delete), the
// key and, for a put, the value, both uvarint-length-prefixed. A record cut short by a
// crash, or whose checksum fails, ends the log: it was never acknowledged.

// logSuffix names the log beside the store's file.
const logSuffix = "-log"

const (
	recPut byte = 1
	recDel byte = 2

	recHeader = 16
	// maxRecord bounds one record, so a damaged length cannot make Open allocate wildly.
	maxRecord = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// epochKey, in the format bucket, holds the last log epoch a checkpoint wrote into the file.
var epochKey = []byte("log-epoch")

// record gathers one commit's writes, already encoded for the log.
type record struct{ b []byte }

func (r *record) reset(epoch uint64) {
	r.b = append(r.b[:0], make([]byte, recHeader)...)
	binary.BigEndian.PutUint64(r.b[8:], epoch)
}

func (r *record) put(b bucket, k, v []byte) {
	r.b = append(r.b, byte(b), recPut)
	r.b = binary.AppendUvarint(r.b, uint64(len(k)))
	r.b = append(r.b, k...)
	r.b = binary.AppendUvarint(r.b, uint64(len(v)))
	r.b = append(r.b, v...)
}

func (r *record) del(b bucket, k []byte) {
	r.b = append(r.b, byte(b), recDel)
	r.b = binary.AppendUvarint(r.b, uint64(len(k)))
	r.b = append(r.b, k...)
}

// empty reports whether the record holds no write.
func (r *record) empty() bool { return len(r.b) == recHeader }

// seal writes the length and checksum; the record is then ready to append.
func (r *record) seal() []byte {
	binary.BigEndian.PutUint32(r.b[0:], uint32(len(r.b)-8))
	binary.BigEndian.PutUint32(r.b[4:], crc32.Checksum(r.b[8:], castagnoli))
	return r.b
}

// wlog is the open log file; only the committer writes it.
type wlog struct {
	f    *os.File
	size int64 // the end of the last whole record
}

// appendRecord writes rec at the log's end and makes it durable. A failed write is cut
// off again, so that a later record never follows a torn one; broken reports that the
// log can take no more records: the cut failed, or the fsync did, after which what
// reached the disk is unknown.
func (l *wlog) appendRecord(rec []byte) (broken bool, err error) {
	_, err = l.f.WriteAt(rec, l.size)
	if err == nil {
		if err = l.f.Sync(); err == nil {
			l.size += int64(len(rec))
			return false, nil
		}
		broken = true
	}
	if terr := l.f.Truncate(l.size); terr != nil {
		return true, errors.Join(err, terr)
	}
	return broken, err
}

// reset empties the log after a checkpoint. Its records are in the file by then, so a
// crash before the truncation is durable only replays them again.
func (l *wlog) reset() error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	l.size = 0
	return nil
}

// readLog reads the log at path and calls fn with each whole record's epoch and writes.
// A missing log is an empty one (existed false). It returns the end of the last whole
// record; a record that is whole but does not parse is damage (E-STORE-001).
func readLog(path string, fn func(epoch uint64, b bucket, del bool, k, v []byte)) (end int64, existed bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, cannotOpen(path, err)
	}
	off := 0
	for len(data)-off >= recHeader {
		n := int(binary.BigEndian.Uint32(data[off:]))
		if n < 8 || n > maxRecord || len(data)-off-8 < n {
			break // cut short by a crash
		}
		body := data[off+8 : off+8+n]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(data[off+4:]) {
			break // torn
		}
		epoch := binary.BigEndian.Uint64(body)
		if err := parseRecord(body[8:], func(b bucket, del bool, k, v []byte) { fn(epoch, b, del, k, v) }); err != nil {
			return 0, true, notAStore(path, fmt.Errorf("log record at byte %d: %w", off, err))
		}
		off += 8 + n
	}
	return int64(off), true, nil
}

func parseRecord(p []byte, fn func(b bucket, del bool, k, v []byte)) error {
	field := func() ([]byte, error) {
		n, w := binary.Uvarint(p)
		if w <= 0 || n > uint64(len(p)-w) {
			return nil, io.ErrUnexpectedEOF
		}
		f := p[w : w+int(n)]
		p = p[w+int(n):]
		return f, nil
	}
	for len(p) > 0 {
		if len(p) < 2 {
			return io.ErrUnexpectedEOF
		}
		b, kind := bucket(p[0]), p[1]
		p = p[2:]
		if b >= nBuckets || kind != recPut && kind != recDel {
			return fmt.Errorf("a write of bucket %d, kind %d", b, kind)
		}
		k, err := field()
		if err != nil {
			return err
		}
		var v []byte
		if kind == recPut {
			if v, err = field(); err != nil {
				return err
			}
		}
		fn(b, kind == recDel, k, v)
	}
	return nil
}
