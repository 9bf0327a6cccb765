package taskdb_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
)

func Example() {
	dir, _ := os.MkdirTemp("", "taskdb")
	defer os.RemoveAll(dir)
	db, err := taskdb.Open(filepath.Join(dir, "tasks.db"), taskdb.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	// Writes return at once; receive from the channel before telling the client the task
	// is accepted, so that the answer never outruns the disk.
	put := db.PutTask(taskstore.Task{Capsule: "hello", ID: "t-1", ContextID: "c-1", Updated: time.Now(), Data: []byte(`{"state":"working"}`)})
	appended := db.Append("hello", taskstore.Event{TaskID: "t-1", Seq: 1, Data: []byte(`{"kind":"status-update"}`)})
	if err := <-put; err != nil {
		fmt.Println(err)
	}
	if err := <-appended; err != nil {
		fmt.Println(err)
	}

	_ = db.Events("hello", "t-1", 0, func(e taskstore.Event) bool {
		fmt.Println(e.Seq, string(e.Data))
		return true
	})
	_, _, err = db.Task("hello", string(make([]byte, 300)))
	fmt.Println(errs.Code(err)) // ids over 256 bytes are refused
	// Output:
	// 1 {"kind":"status-update"}
	// E-STORE-003
}
