//go:build linux

package wasm

import (
	"bytes"
	"encoding/binary"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// pageKinds reads the pagemap entries of buf's pages: 'f' still the image's (file), 'a' a
// private copy, '-' not present.
func pageKinds(t *testing.T, buf []byte) string {
	t.Helper()
	pm, err := pagemapFile()
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	page := os.Getpagesize()
	e := make([]byte, len(buf)/page*8)
	if _, err := pm.ReadAt(e, int64(uintptr(unsafe.Pointer(&buf[0]))/uintptr(page)*8)); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for i := 0; i < len(e); i += 8 {
		v := binary.LittleEndian.Uint64(e[i:])
		switch {
		case v&(1<<63) == 0:
			b = append(b, '-')
		case v&(1<<61) != 0:
			b = append(b, 'f')
		default:
			b = append(b, 'a')
		}
	}
	return string(b)
}

// TestRestoreOnto maps a sparse image (data pages and zero pages) onto a memory, lets a
// "call" write, read and grow into pages, and restores in place: the memory reads as the
// image again, written pages stay private copies (the next call writes them without a
// fault), pages only read still map the image. Repeated rounds keep it exact; a closed
// image refuses, so the reset falls back to remapping.
func TestRestoreOnto(t *testing.T) {
	page := os.Getpagesize()
	const pages = 8
	want := make([]byte, pages*page)
	for _, p := range []int{0, 2, 3, 6} { // pages 1, 4, 5, 7 are holes
		for i := range page {
			want[p*page+i] = byte(p*31 + i%251 + 1)
		}
	}
	img, err := newSparseImage(want)
	if err != nil {
		t.Fatal(err)
	}
	defer img.close()
	buf, err := syscall.Mmap(-1, 0, 2*len(want), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(buf)
	if err := img.mapOnto(buf); err != nil {
		t.Fatal(err)
	}
	var scratch []byte
	for _, tt := range []struct {
		name        string
		write, read []int
	}{
		{"writes to data and holes", []int{0, 1, 6}, []int{2}},
		{"the same pages again", []int{0, 1, 6}, []int{2, 3}},
		{"other pages", []int{3, 7}, []int{4}},
		{"every page", []int{0, 1, 2, 3, 4, 5, 6, 7}, nil},
		{"nothing", nil, []int{5}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range tt.write {
				for i := p * page; i < (p+1)*page; i += 512 {
					buf[i] ^= 0xff
				}
			}
			var sum byte
			for _, p := range tt.read {
				sum += buf[p*page+7]
			}
			_ = sum
			if err := img.restoreOnto(buf, &scratch); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:len(want)], want) {
				t.Fatal("memory differs from the image after the restore")
			}
			kinds := pageKinds(t, buf[:len(want)])
			for _, p := range tt.write {
				if kinds[p] != 'a' {
					t.Errorf("page %d written then restored is %q, want a private copy (%s)", p, kinds[p], kinds)
				}
			}
		})
	}
	img.close()
	if err := img.restoreOnto(buf, &scratch); err == nil {
		t.Error("a closed image restored")
	}
}

// TestSparseImageRuns: the image holds exactly the memory it was made from, whatever its
// runs of data pages and holes, a run at the end and a last page cut short included.
func TestSparseImageRuns(t *testing.T) {
	const page = 4096
	for _, tc := range []struct {
		name  string
		size  int
		pages []int // pages holding data
	}{
		{"holes only", 4 * page, nil},
		{"data only", 4 * page, []int{0, 1, 2, 3}},
		{"a run at the start", 4 * page, []int{0, 1}},
		{"a run at the end", 4 * page, []int{2, 3}},
		{"runs between holes", 8 * page, []int{1, 2, 4, 6, 7}},
		{"a last page cut short", 3*page + 100, []int{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]byte, tc.size)
			for _, p := range tc.pages {
				for i := p * page; i < min((p+1)*page, tc.size); i++ {
					want[i] = byte(i%253 + 1)
				}
			}
			img, err := newSparseImage(want)
			if err != nil {
				t.Fatal(err)
			}
			defer img.close()
			got := make([]byte, tc.size)
			if n, err := syscall.Pread(img.fd, got, 0); err != nil || n != tc.size {
				t.Fatalf("read %d bytes of the image: %v", n, err)
			}
			if !bytes.Equal(got, want) {
				t.Error("the image differs from the memory it was made from")
			}
		})
	}
}
