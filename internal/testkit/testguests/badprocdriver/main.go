//go:build wasip1

// Command badprocdriver is a process driver whose describe() breaks every rule staging
// checks: no harness, no binary, unusable required-env names and a login check without
// arguments. Its other functions are never reached.
package main

import "github.com/capsulegate/capsulegate/wit/guest/process"

type driver struct{}

func (driver) Describe() process.Description {
	return process.Description{Interrupt: process.InterruptUnsupported, RequiredEnv: []string{"", "A=B", "NUL\x00X"}, LoginCheck: []string{}}
}

func (driver) Launch(process.LaunchRequest) (process.LaunchPlan, error) {
	return process.LaunchPlan{}, nil
}
func (driver) Parse([]string) []process.Event { return nil }
func (driver) ClassifyExit(process.ExitStatus) process.Event {
	return process.Event{Case: process.TurnEnd}
}
func (driver) ReadLogin(process.LoginOutput) (string, string) { return process.Unknown, "" }

func init() { process.Handle(driver{}) }

func main() {}
