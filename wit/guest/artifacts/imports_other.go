//go:build !wasip1

package artifacts

import "github.com/capsulegate/capsulegate/wit/guest"

// Outside wasip1 the imports exist so that the package builds and documents on the
// host: each returns guest.ErrNotGuest.

// List returns the artifacts installed for the capsule.
func List() ([]Summary, error) { return nil, guest.ErrNotGuest }

// Describe returns the installed artifact name, in full.
func Describe(name string) (Info, error) { return Info{}, guest.ErrNotGuest }

// Search returns the artifacts the registry offers that match query.
func Search(query string) ([]Summary, error) { return nil, guest.ErrNotGuest }

// Pull installs version of name from the registry and returns what was installed.
func Pull(name, version string) (Summary, error) { return Summary{}, guest.ErrNotGuest }

// Remove uninstalls name; false when it was not installed.
func Remove(name string) (bool, error) { return false, guest.ErrNotGuest }

// Diagnostics returns the runtime's state as the capsule sees it.
func Diagnostics() (RuntimeState, error) { return RuntimeState{}, guest.ErrNotGuest }
