// zkgo runs the Go ZooKeeper client (go-zookeeper) against a server and
// checks the places where it once found Paddock stricter than ZooKeeper.
//
//	zkgo HOST:PORT ROOT
//
// ROOT is a fresh persistent znode to work under. Prints one line per
// check and exits non-zero on the first failure.
package main

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/go-zookeeper/zk"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: zkgo HOST:PORT ROOT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

func run(server, root string) error {
	conn, events, err := zk.Connect([]string{server}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if err := waitConnected(events); err != nil {
		return err
	}
	acl := zk.WorldACL(zk.PermAll)

	// Create with FlagContainer goes out as a plain create (opcode 1);
	// ZooKeeper makes a persistent node.
	path, err := conn.Create(root+"/flag-container", []byte("x"), zk.FlagContainer, acl)
	if err != nil {
		return fmt.Errorf("Create with FlagContainer: %w", err)
	}
	if path != root+"/flag-container" {
		return fmt.Errorf("Create with FlagContainer returned %q", path)
	}
	fmt.Println("ok create with FlagContainer:", path)

	// CreateContainer uses opcode 19 and makes a container.
	if _, err := conn.CreateContainer(root+"/container", nil, zk.FlagContainer, acl); err != nil {
		return fmt.Errorf("CreateContainer: %w", err)
	}
	fmt.Println("ok CreateContainer")

	// Digest credentials without a colon are accepted by ZooKeeper.
	if err := conn.AddAuth("digest", []byte("blah")); err != nil {
		return fmt.Errorf("AddAuth digest blah: %w", err)
	}
	if _, _, err := conn.Exists(root); err != nil {
		return fmt.Errorf("session after AddAuth: %w", err)
	}
	fmt.Println("ok AddAuth digest without a colon; session alive")

	// Data round trip, empty included.
	if _, err := conn.Set(root+"/flag-container", []byte{}, -1); err != nil {
		return fmt.Errorf("Set empty: %w", err)
	}
	data, stat, err := conn.Get(root + "/flag-container")
	if err != nil || !bytes.Equal(data, []byte{}) || stat.DataLength != 0 || stat.Version != 1 {
		return fmt.Errorf("Get after Set empty: %q %+v %v", data, stat, err)
	}
	fmt.Println("ok set and get empty data")
	return nil
}

func waitConnected(events <-chan zk.Event) error {
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no session within 20 s")
		}
	}
}
