//go:build !wasip1

package message

import "github.com/capsulegate/capsulegate/wit/guest"

// Send sends m to the peer whose A2A endpoint is peerURL and returns its task's result.
// Outside a wasip1 guest it returns guest.ErrNotGuest.
func Send(peerURL string, m Message) (TaskResult, error) { return TaskResult{}, guest.ErrNotGuest }
