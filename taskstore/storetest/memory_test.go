package storetest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
	"github.com/capsulegate/capsulegate/taskstore/storetest"
)

// TestMemoryStore runs the conformance table against a store written here, outside the
// store's packages, from the interface and its documentation alone: the proof that a
// second implementation (PostgreSQL's) can be written against taskstore.Store.
func TestMemoryStore(t *testing.T) {
	var mu sync.Mutex
	saved := map[string][]byte{} // place → what Close left there
	storetest.Run(t, storetest.Backend{
		Open: func(place string) (taskstore.Store, error) {
			mu.Lock()
			defer mu.Unlock()
			return openMemory(saved[place], func(b []byte) {
				mu.Lock()
				saved[place] = b
				mu.Unlock()
			})
		},
		Close: func(s taskstore.Store) error { return s.(*memory).Close() },
		Damage: func(t *testing.T, place string) {
			mu.Lock()
			defer mu.Unlock()
			if saved[place] == nil {
				t.Fatalf("nothing saved at %s to damage", place)
			}
			saved[place] = saved[place][:len(saved[place])/2]
		},
	})
}

// memory keeps everything in maps; Close hands the whole store, encoded, to save, and
// openMemory starts from such an encoding: its restart.
type memory struct {
	mu     sync.Mutex
	closed bool
	save   func([]byte)
	d      memData
}

// memData is what a memory store holds, keyed by capsule + "\x00" + id.
type memData struct {
	Tasks  map[string]taskstore.Task
	Events map[string]map[uint64][]byte // by task key
	Turns  map[string][][]byte          // by capsule + context
	Pushes map[string]map[string]taskstore.Push
	Blobs  map[string]map[string][]byte    // by task key, then blob id
	Pins   map[string]taskstore.RuntimePin // by capsule + name
}

func key(capsule, id string) string { return capsule + "\x00" + id }

func openMemory(saved []byte, save func([]byte)) (*memory, error) {
	m := &memory{save: save, d: memData{Tasks: map[string]taskstore.Task{}, Events: map[string]map[uint64][]byte{},
		Turns: map[string][][]byte{}, Pushes: map[string]map[string]taskstore.Push{}, Blobs: map[string]map[string][]byte{},
		Pins: map[string]taskstore.RuntimePin{}}}
	if saved != nil {
		if err := json.Unmarshal(saved, &m.d); err != nil {
			return nil, errs.Wrap(err, taskstore.CodeNotAStore, "memory", "the saved store cannot be read",
				"start from an empty store")
		}
	}
	return m, nil
}

// Close saves the store; a second Close does nothing.
func (m *memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	b, err := json.Marshal(m.d)
	if err != nil {
		return err
	}
	m.save(b)
	return nil
}

// write applies fn under the lock unless the store is closed, as a write whose channel
// already holds its outcome.
func (m *memory) write(check error, fn func() error) <-chan error {
	ch := make(chan error, 1)
	if check != nil {
		ch <- check
		return ch
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		ch <- taskstore.Closed()
		return ch
	}
	ch <- fn()
	return ch
}

// ids checks the named ids (name, value, name, value...).
func ids(pairs ...string) error {
	for i := 0; i < len(pairs); i += 2 {
		if err := taskstore.CheckID(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (m *memory) PutTask(t taskstore.Task) <-chan error {
	return m.write(taskstore.CheckTask(t), func() error {
		t.Data = slices.Clone(t.Data)
		m.d.Tasks[key(t.Capsule, t.ID)] = t
		return nil
	})
}

func (m *memory) Append(capsule string, events ...taskstore.Event) <-chan error {
	check := ids("capsule", capsule)
	for _, e := range events {
		check = errors.Join(check, ids("task id", e.TaskID))
	}
	return m.write(check, func() error {
		for _, e := range events {
			k := key(capsule, e.TaskID)
			if m.d.Events[k] == nil {
				m.d.Events[k] = map[uint64][]byte{}
			}
			m.d.Events[k][e.Seq] = slices.Clone(e.Data)
		}
		return nil
	})
}

func (m *memory) AddTurn(capsule, contextID string, item []byte) <-chan error {
	return m.write(ids("capsule", capsule, "context id", contextID), func() error {
		k := key(capsule, contextID)
		m.d.Turns[k] = append(m.d.Turns[k], slices.Clone(item))
		return nil
	})
}

func (m *memory) DeleteTask(capsule, id string) <-chan error {
	return m.write(ids("capsule", capsule, "task id", id), func() error {
		m.deleteLocked(key(capsule, id))
		return nil
	})
}

func (m *memory) deleteLocked(k string) {
	delete(m.d.Tasks, k)
	delete(m.d.Events, k)
	delete(m.d.Pushes, k)
	delete(m.d.Blobs, k)
}

func (m *memory) PutPush(capsule string, p taskstore.Push) <-chan error {
	return m.write(ids("capsule", capsule, "task id", p.TaskID, "push config id", p.ID), func() error {
		k := key(capsule, p.TaskID)
		if _, ok := m.d.Tasks[k]; !ok {
			return taskstore.NoTask()
		}
		if m.d.Pushes[k] == nil {
			m.d.Pushes[k] = map[string]taskstore.Push{}
		}
		p.Data = slices.Clone(p.Data)
		m.d.Pushes[k][p.ID] = p
		return nil
	})
}

func (m *memory) SetDelivered(capsule, taskID, id string, seq uint64) <-chan error {
	return m.write(ids("capsule", capsule, "task id", taskID, "push config id", id), func() error {
		if p, ok := m.d.Pushes[key(capsule, taskID)][id]; ok && p.Delivered < seq {
			p.Delivered = seq
			m.d.Pushes[key(capsule, taskID)][id] = p
		}
		return nil
	})
}

func (m *memory) DeletePush(capsule, taskID, id string) <-chan error {
	return m.write(ids("capsule", capsule, "task id", taskID, "push config id", id), func() error {
		delete(m.d.Pushes[key(capsule, taskID)], id)
		return nil
	})
}

// read runs fn under the lock after checking the ids.
func (m *memory) read(check error, fn func()) error {
	if check != nil {
		return check
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fn()
	return nil
}

func (m *memory) Task(capsule, id string) (t taskstore.Task, ok bool, err error) {
	err = m.read(ids("capsule", capsule, "task id", id), func() { t, ok = m.d.Tasks[key(capsule, id)] })
	return t, ok, err
}

// tasksOf returns the capsule's tasks, in id order (m.mu held).
func (m *memory) tasksOf(capsule string) []taskstore.Task {
	var out []taskstore.Task
	for k, t := range m.d.Tasks {
		if strings.HasPrefix(k, capsule+"\x00") {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (m *memory) Heads(capsule string, fn func(taskstore.Head) bool) error {
	var hs []taskstore.Head
	err := m.read(ids("capsule", capsule), func() {
		for _, t := range m.tasksOf(capsule) {
			hs = append(hs, taskstore.HeadOf(t))
		}
	})
	for _, h := range hs { // outside the lock: fn may call the store
		if !fn(h) {
			break
		}
	}
	return err
}

func (m *memory) Events(capsule, taskID string, after uint64, fn func(taskstore.Event) bool) error {
	var evs []taskstore.Event
	err := m.read(ids("capsule", capsule, "task id", taskID), func() {
		for seq, data := range m.d.Events[key(capsule, taskID)] {
			if seq > after {
				evs = append(evs, taskstore.Event{TaskID: taskID, Seq: seq, Data: data})
			}
		}
	})
	sort.Slice(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
	for _, e := range evs {
		if !fn(e) {
			break
		}
	}
	return err
}

func (m *memory) Turns(capsule, contextID string) (out [][]byte, err error) {
	err = m.read(ids("capsule", capsule, "context id", contextID), func() { out = slices.Clone(m.d.Turns[key(capsule, contextID)]) })
	return out, err
}

func (m *memory) PutBlob(capsule, taskID, id string, data []byte) <-chan error {
	return m.write(ids("capsule", capsule, "task id", taskID, "blob id", id), func() error {
		k := key(capsule, taskID)
		if m.d.Blobs == nil {
			m.d.Blobs = map[string]map[string][]byte{}
		}
		if m.d.Blobs[k] == nil {
			m.d.Blobs[k] = map[string][]byte{}
		}
		m.d.Blobs[k][id] = append([]byte{}, data...)
		return nil
	})
}

func (m *memory) Blob(capsule, taskID, id string) (out []byte, found bool, err error) {
	err = m.read(ids("capsule", capsule, "task id", taskID, "blob id", id), func() {
		var b []byte
		if b, found = m.d.Blobs[key(capsule, taskID)][id]; found {
			out = append([]byte{}, b...)
		}
	})
	return out, found, err
}

func (m *memory) Pushes(capsule, taskID string) (out []taskstore.Push, err error) {
	err = m.read(ids("capsule", capsule, "task id", taskID), func() {
		for _, p := range m.d.Pushes[key(capsule, taskID)] {
			out = append(out, p)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

func (m *memory) AllPushes(capsule string, fn func(taskstore.Push) bool) error {
	var all []taskstore.Push
	err := m.read(ids("capsule", capsule), func() {
		for _, t := range m.tasksOf(capsule) {
			for _, p := range m.d.Pushes[key(capsule, t.ID)] {
				all = append(all, p)
			}
		}
	})
	for _, p := range all {
		if !fn(p) {
			break
		}
	}
	return err
}

func (m *memory) Evict(capsule string, olderThan time.Time, maxTasks int, keep func(id string) bool) (int, error) {
	if err := ids("capsule", capsule); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, taskstore.Closed()
	}
	var due []taskstore.Task
	live := map[string]bool{} // contexts a remaining task belongs to
	for _, t := range m.tasksOf(capsule) {
		if keep != nil && keep(t.ID) {
			live[t.ContextID] = true
		} else {
			due = append(due, t)
		}
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].Updated.Before(due[j].Updated) })
	cut := 0
	for cut < len(due) && due[cut].Updated.Before(olderThan) {
		cut++
	}
	if maxTasks > 0 && len(due)-cut > maxTasks {
		cut = len(due) - maxTasks
	}
	for _, t := range due[cut:] {
		live[t.ContextID] = true
	}
	for _, t := range due[:cut] {
		m.deleteLocked(key(capsule, t.ID))
		if t.ContextID != "" && !live[t.ContextID] {
			delete(m.d.Turns, key(capsule, t.ContextID))
		}
	}
	return cut, nil
}

// RuntimePins, PutRuntimePin and DeleteRuntimePin make the memory store a taskstore.Pins,
// written from the interface's documentation alone too.
func (m *memory) RuntimePins(ctx context.Context, capsule string) (out []taskstore.RuntimePin, err error) {
	err = m.read(ids("capsule", capsule), func() {
		for k, p := range m.d.Pins {
			if strings.HasPrefix(k, capsule+"\x00") {
				out = append(out, p)
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func (m *memory) PutRuntimePin(ctx context.Context, p taskstore.RuntimePin) error {
	return <-m.write(taskstore.CheckRuntimePin(p), func() error {
		if m.d.Pins == nil {
			m.d.Pins = map[string]taskstore.RuntimePin{}
		}
		m.d.Pins[key(p.Capsule, p.Name)] = p
		return nil
	})
}

func (m *memory) DeleteRuntimePin(ctx context.Context, capsule, name string) (had bool, err error) {
	check := ids("capsule", capsule)
	if check == nil {
		check = taskstore.CheckPinName(name)
	}
	err = <-m.write(check, func() error {
		_, had = m.d.Pins[key(capsule, name)]
		delete(m.d.Pins, key(capsule, name))
		return nil
	})
	return had, err
}

// The memory store must be a taskstore.Store and a taskstore.Pins; this fails to
// compile otherwise.
var (
	_ taskstore.Store = (*memory)(nil)
	_ taskstore.Pins  = (*memory)(nil)
)
