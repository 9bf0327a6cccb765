package component

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteSummary writes a readable account of the plan: the world (imports and exports
// with versions and function types), the core modules (size, imports by module) and
// the steps in order. compdump prints it; tests log it.
func (p *Plan) WriteSummary(w io.Writer) error {
	var b strings.Builder
	item := func(kind string, it WorldItem) {
		fmt.Fprintf(&b, "%s %s", kind, it.Name)
		if it.Version != "" {
			fmt.Fprintf(&b, " (interface %s, version %s)", it.Interface, it.Version)
		}
		fmt.Fprintf(&b, ": %s\n", it.Sort)
		if len(it.Resources) > 0 {
			fmt.Fprintf(&b, "    resources: %s\n", strings.Join(it.Resources, ", "))
		}
		for _, f := range it.Funcs {
			name := f.Name
			if name == "" {
				name = it.Name
			}
			fmt.Fprintf(&b, "    %s: %s", name, f.Type.WIT())
			if kind == "export" {
				fmt.Fprintf(&b, "  <- %s", f.Ref)
			}
			b.WriteString("\n")
		}
		if it.Sort == SortType && it.Type != nil {
			fmt.Fprintf(&b, "    = %s\n", it.Type.Definition())
		}
	}
	b.WriteString("world:\n")
	for _, it := range p.World.Imports {
		item("import", it)
	}
	for _, it := range p.World.Exports {
		item("export", it)
	}
	b.WriteString("core modules:\n")
	for i, m := range p.Modules {
		fmt.Fprintf(&b, "  module %d: %d bytes, %d imports, %d exports\n", i, len(m.Bytes), len(m.Imports), len(m.Exports))
		byMod := map[string][]string{}
		var mods []string
		for _, imp := range m.Imports {
			if _, ok := byMod[imp.Module]; !ok {
				mods = append(mods, imp.Module)
			}
			byMod[imp.Module] = append(byMod[imp.Module], imp.Name)
		}
		sort.Strings(mods)
		for _, mod := range mods {
			fmt.Fprintf(&b, "    imports %q: %s\n", mod, strings.Join(byMod[mod], ", "))
		}
	}
	fmt.Fprintf(&b, "steps (%d core instances, %d core funcs, %d lifted funcs):\n", p.CoreInstances, p.CoreFuncs, p.Lifts)
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "  %3d %s\n", i, s)
		if s.Kind == StepInstantiate {
			for _, a := range s.Imports {
				fmt.Fprintf(&b, "        %q.%q <- %s\n", a.Module, a.Name, a.Item)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
