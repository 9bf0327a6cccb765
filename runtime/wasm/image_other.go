//go:build !linux

package wasm

import "errors"

// memImage is unused where memfd is unavailable: modules keep their data segments.
type memImage struct{ size uint64 }

const imagesSupported = false

func newMemImage(*dataImage) (*memImage, error) { return nil, errors.New("memory images need linux") }

func (m *memImage) mapOnto([]byte) error { return errors.New("memory images need linux") }

func (m *memImage) restoreOnto([]byte, *[]byte) error { return errors.New("memory images need linux") }

func (m *memImage) close() {}

func newSparseImage([]byte) (*memImage, error) { return nil, errors.New("memory images need linux") }
