// Package caddymodule plugs capsulegate into Caddy: the `caddy capsule …` subcommands
// (and, in later releases, the capsule app and HTTP handlers). It is glue only; the work
// is done by packages that know nothing of Caddy.
package caddymodule

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/capsulegate/capsulegate/caddymodule/cli"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "capsule",
		Usage: "<run|install|verify|explain|pack|publish|search|doctor|replay|store> …",
		Short: "Manages Murmur capsules and their artifacts",
		Long: `
Manages Murmur capsules: runs one task of a capsule (run), resolves and pins its
artifacts (install), checks them against murmur.lock (verify), prints what a
capsule is granted on this host (explain), builds artifact
packages (pack), adds them to a registry (publish), lists a registry's
artifacts (search), reports on a harness (doctor), serves recorded model
answers from cassettes for tests and demos without a key (replay), and checks or
compacts a gateway's task store file offline (store check|compact).

run, install, verify, explain, publish, search and doctor take --registry: a folder,
oci://host/repo, nexus+https://host, or on loopback oci+http:// and nexus+http://
(default: $CAPSULE_REGISTRY, else the folder <caddy data dir>/capsule/registry, the
gateway's default too). A Nexus registry's key comes from $NEXUS_API_KEY, an OCI
registry's credentials from the Docker credential config. Every subcommand takes
--json. Exit codes: 0 ok, 1 refused, 2 usage.`,
		CobraFunc: addSubcommands,
	})
}

// addSubcommands builds `caddy capsule …` under cmd.
func addSubcommands(cmd *cobra.Command) {
	run := withRegistry(sub("run <manifest>", "Runs one task of a capsule to the end; exits 0 only if it completed", 1,
		func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
			fl := cmd.Flags()
			task, _ := fl.GetString("task")
			workdir, _ := fl.GetString("workdir")
			workRoot, _ := fl.GetString("work-root")
			if workRoot == "" {
				workRoot = filepath.Join(caddy.AppDataDir(), "capsule", "work")
			}
			return cli.Run(ctx, e, c, args[0], cli.RunFlags{Task: task, Workdir: workdir, WorkRoot: workRoot,
				CacheDir: filepath.Join(caddy.AppDataDir(), "capsule", "cache")})
		}))
	run.Flags().String("task", "", "the task text, or @file to read it from a file")
	run.Flags().String("workdir", "", "use this folder as the accessible workdir (created if absent)")
	run.Flags().String("work-root", "", "where sessions and their records live (default: Caddy's data dir /capsule/work)")
	cmd.AddCommand(
		run,
		withRegistry(sub("install <manifest>", "Resolves a capsule's artifacts and writes murmur.lock beside it", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				return cli.Install(ctx, e, c, args[0])
			})),
		withRegistry(sub("verify <manifest>", "Checks a capsule's artifacts against murmur.lock and the registry; touches nothing", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				return cli.Verify(ctx, e, c, args[0])
			})),
		withString(sub("pack <dir>", "Builds a .mur.zip from a folder holding an artifact murmur.yaml and its payload", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				out, _ := cmd.Flags().GetString("output")
				return cli.Pack(ctx, e, c, args[0], out)
			}), "output", "o", "where to write the archive (default ./<name>-<version>.mur.zip)"),
		withRegistry(withString(sub("publish <file.mur.zip>", "Adds an artifact package to the registry (atomic; never overwrites a different one)", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				plat, _ := cmd.Flags().GetString("platform")
				return cli.Publish(ctx, e, c, args[0], plat)
			}), "platform", "", "the platform of a native artifact: linux-x86_64, linux-aarch64, darwin-x86_64, darwin-aarch64")),
		withRegistry(sub("search <query>", "Lists the registry's artifacts whose name, description or tags hold every word of the query (\"\" lists all)", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				return cli.Search(ctx, e, c, args[0])
			})),
		withRegistry(withString(sub("doctor <manifest>", "Reports on a process capsule's harness (found, version, login state, the variables it needs) and, with --store, the artifacts the capsule pulled at run time", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				store, _ := cmd.Flags().GetString("store")
				return cli.Doctor(ctx, e, c, args[0], filepath.Join(caddy.AppDataDir(), "capsule", "cache"), store)
			}), "store", "", "the gateway's task store (tasks.db, postgres://… or env:NAME): list the capsule's runtime pins")),
		withRegistry(sub("explain <manifest>", "Prints the effective grants of a capsule as it would be staged on this host: file system, network, environment, every artifact, the shell sandbox's tier and what it cannot protect here, limits, hooks, peers", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				return cli.Explain(ctx, e, c, args[0], filepath.Join(caddy.AppDataDir(), "capsule", "cache"))
			})),
		replayCommand(),
		storeCommand(),
	)
}

// storeCommand builds `caddy capsule store check|compact|migrate`, the task store
// commands; they take no --registry.
func storeCommand() *cobra.Command {
	store := &cobra.Command{
		Use:   "store <check|compact|migrate> <file|postgres://…|env:NAME>",
		Short: "Checks, compacts or migrates a gateway's task store",
		Args: func(cmd *cobra.Command, args []string) error {
			usageExit(cmd, fmt.Errorf("store takes a subcommand: check, compact or migrate"))
			return nil
		},
		Run: func(*cobra.Command, []string) {},
	}
	store.AddCommand(
		sub("check <file|postgres://…|env:NAME>", "Opens a task store read-only and checks it; prints what it holds", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				return cli.StoreCheck(ctx, e, c, args[0])
			}),
		sub("compact <file>", "Rewrites a task store without its free pages (refused while a gateway holds it)", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				return cli.StoreCompact(ctx, e, c, args[0])
			}),
		sub("migrate <postgres://…|env:NAME>", "Brings a PostgreSQL task store's schema to this release (a starting gateway does too)", 1,
			func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int {
				return cli.StoreMigrate(ctx, e, c, args[0])
			}),
	)
	return store
}

type runFunc func(ctx context.Context, e *cli.Env, c cli.Common, cmd *cobra.Command, args []string) int

// sub builds one subcommand, with --json, whose exit code is exactly what run returns;
// usage errors (flags, argument count) exit 2.
func sub(use, short string, nargs int, run runFunc) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != nargs {
				usageExit(cmd, fmt.Errorf("%s takes %d argument(s), got %d", cmd.Name(), nargs, len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			reg := ""
			if f := cmd.Flags().Lookup("registry"); f != nil {
				reg = f.Value.String()
			}
			asJSON, _ := cmd.Flags().GetBool("json")
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			e := &cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Terminal: term.IsTerminal(int(os.Stderr.Fd())), DataDir: caddy.AppDataDir()}
			code := run(ctx, e, cli.Common{Registry: reg, JSON: asJSON}, cmd, args)
			if code != cli.ExitOK {
				stop()
				os.Exit(code)
			}
			return nil
		},
	}
	c.Flags().Bool("json", false, "print one JSON object on stdout")
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		usageExit(cmd, err)
		return err
	})
	return c
}

// withRegistry gives a subcommand that reads a registry its --registry flag.
func withRegistry(c *cobra.Command) *cobra.Command {
	c.Flags().String("registry", "", "registry: a folder, oci://host/repo or nexus+https://host (default: $CAPSULE_REGISTRY, else "+filepath.Join(caddy.AppDataDir(), "capsule", "registry")+")")
	return c
}

func withString(c *cobra.Command, name, short, usage string) *cobra.Command {
	c.Flags().StringP(name, short, "", usage)
	return c
}

func usageExit(cmd *cobra.Command, err error) {
	fmt.Fprintf(os.Stderr, "error: %v\n\n%s", err, cmd.UsageString())
	os.Exit(cli.ExitUsage)
}
