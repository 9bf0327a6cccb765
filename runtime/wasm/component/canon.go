package component

import "github.com/capsulegate/capsulegate/wit/abi"

var (
	sigI32ToNone = &CoreFuncType{Params: []abi.ValType{abi.I32}}
	sigI32ToI32  = &CoreFuncType{Params: []abi.ValType{abi.I32}, Results: []abi.ValType{abi.I32}}
	sigRealloc   = &CoreFuncType{Params: []abi.ValType{abi.I32, abi.I32, abi.I32, abi.I32}, Results: []abi.ValType{abi.I32}}
)

// builtinNames are the canon built-ins this runtime refuses (async, streams, futures,
// error contexts, threads), by opcode, for the error message.
var builtinNames = map[byte]string{
	0x05: "task.cancel", 0x06: "subtask.cancel", 0x07: "resource.drop async", 0x08: "thread.spawn",
	0x09: "task.return", 0x0a: "context.get", 0x0b: "context.set", 0x0c: "thread.yield",
	0x0d: "subtask.drop", 0x0e: "stream.new", 0x0f: "stream.read", 0x10: "stream.write",
	0x11: "stream.cancel-read", 0x12: "stream.cancel-write", 0x13: "stream.drop-readable",
	0x14: "stream.drop-writable", 0x15: "future.new", 0x16: "future.read", 0x17: "future.write",
	0x18: "future.cancel-read", 0x19: "future.cancel-write", 0x1a: "future.drop-readable",
	0x1b: "future.drop-writable", 0x1c: "error-context.new", 0x1d: "error-context.debug-message",
	0x1e: "error-context.drop", 0x1f: "waitable-set.new", 0x20: "waitable-set.wait",
	0x21: "waitable-set.poll", 0x22: "waitable-set.drop", 0x23: "waitable.join",
	0x24: "backpressure.inc", 0x25: "backpressure.dec", 0x26: "thread.index",
	0x27: "thread.new-indirect", 0x28: "thread.resume-later", 0x29: "thread.suspend",
	0x2a: "thread.suspend-then-resume", 0x2b: "thread.yield-then-resume",
	0x2c: "thread.suspend-then-promote", 0x2d: "thread.yield-then-promote",
	0x40: "thread.spawn-ref", 0x41: "thread.spawn-indirect", 0x42: "thread.available-parallelism",
}

func (c *Component) parseCanon(r *reader) {
	off := r.p
	b := r.byte()
	cd := &canonDef{}
	switch b {
	case 0x00, 0x01:
		if x := r.byte(); x != 0x00 {
			failAt(r.path, r.p-1, CodeMalformed, "canon %s: sort byte 0x%02x, want 0x00 (func)", map[byte]string{0: "lift", 1: "lower"}[b], x)
		}
		if b == 0x00 {
			cd.op = canonLift
			cd.fn = c.index(r, SortCoreFunc)
		} else {
			cd.op = canonLower
			cd.fn = c.index(r, SortFunc)
		}
		cd.opts = c.canonOpts(r)
		if b == 0x00 {
			toff := r.p
			ti := c.index(r, SortType)
			cd.typ = c.sc.types[ti]
			if cd.typ.Kind != KindFunc {
				failAt(r.path, toff, CodeType, "canon lift: type %d is a %s, not a function type", ti, kindName(cd.typ))
			}
		} else {
			cd.typ = c.sp.funcs[cd.fn]
		}
		c.checkCanon(r, off, cd)
		if cd.op == canonLift {
			c.sp.funcs = append(c.sp.funcs, cd.typ)
			c.defs = append(c.defs, def{kind: defCanon, sort: SortFunc, off: off, canon: cd})
			return
		}
		f, _ := cd.typ.Func()
		p, res := f.ImportSignature()
		c.sp.coreFuncs = append(c.sp.coreFuncs, &CoreFuncType{Params: p, Results: res})
	case 0x02, 0x03, 0x04:
		cd.op = map[byte]canonOp{2: canonResourceNew, 3: canonResourceDrop, 4: canonResourceRep}[b]
		toff := r.p
		ti := c.index(r, SortType)
		cd.typ = c.sc.types[ti]
		if cd.typ.Kind != KindResource {
			failAt(r.path, toff, CodeType, "canon resource built-in on type %d, which is a %s, not a resource", ti, kindName(cd.typ))
		}
		if cd.op != canonResourceDrop && !cd.typ.Resource.Defined {
			failAt(r.path, toff, CodeType, "canon resource.new and resource.rep apply only to resources the component defines; type %d (%s) is imported", ti, cd.typ.resourceName())
		}
		sig := sigI32ToI32
		if cd.op == canonResourceDrop {
			sig = sigI32ToNone
		}
		c.sp.coreFuncs = append(c.sp.coreFuncs, sig)
	default:
		if n, ok := builtinNames[b]; ok {
			failAt(r.path, off, CodeUnsupported, "canon %s (async, streams, error contexts and threads are not supported)", n)
		}
		failAt(r.path, off, CodeUnknown, "unknown canon opcode 0x%02x", b)
	}
	c.defs = append(c.defs, def{kind: defCanon, sort: SortCoreFunc, off: off, canon: cd})
}

func (c *Component) canonOpts(r *reader) canonOpts {
	o := canonOpts{memory: -1, realloc: -1, postReturn: -1}
	n := r.count("option")
	for i := 0; i < n; i++ {
		off := r.p
		dup := func(set bool, what string) {
			if set {
				failAt(r.path, off, CodeType, "canon option %s given twice", what)
			}
		}
		switch b := r.byte(); b {
		case 0x00, 0x01, 0x02:
			dup(o.encoding != "", "string-encoding")
			o.encoding = [...]string{"utf8", "utf16", "latin1+utf16"}[b]
		case 0x03:
			dup(o.memory >= 0, "memory")
			o.memory = c.index(r, SortCoreMemory)
		case 0x04:
			dup(o.realloc >= 0, "realloc")
			o.realloc = c.index(r, SortCoreFunc)
			if sig := c.sp.coreFuncs[o.realloc]; sig != nil && !sig.Equal(sigRealloc) {
				failAt(r.path, off, CodeType, "realloc has type %s, want %s", sig, sigRealloc)
			}
		case 0x05:
			dup(o.postReturn >= 0, "post-return")
			o.postReturn = c.index(r, SortCoreFunc)
		case 0x06, 0x07:
			failAt(r.path, off, CodeUnsupported, "async canon options (async, callback) are not supported")
		default:
			failAt(r.path, off, CodeUnknown, "unknown canon option 0x%02x", b)
		}
	}
	if o.encoding == "" {
		o.encoding = "utf8"
	}
	return o
}

// flatN is the number of core values a value of t flattens to (0 for none).
func flatN(t *Type) int {
	if t == nil {
		return 0
	}
	return t.flat
}

// checkCanon checks a lift's or lower's options against its function type, and a
// lift's core function against the signature the canonical ABI gives the type.
func (c *Component) checkCanon(r *reader, off int, cd *canonDef) {
	f, _ := cd.typ.Func()
	bufParams := false
	nParams := 0
	for _, p := range cd.typ.Fields {
		bufParams = bufParams || p.Type.buffer
		nParams += flatN(p.Type)
	}
	bufResults := cd.typ.Result != nil && cd.typ.Result.buffer
	paramsSpill := nParams > abi.MaxFlatParams
	resultsSpill := flatN(cd.typ.Result) > abi.MaxFlatResults
	needMem := bufParams || bufResults || paramsSpill || resultsSpill
	var needRealloc bool
	if cd.op == canonLift {
		needRealloc = bufParams || paramsSpill
		ep, er := f.ExportSignature()
		if cd.opts.postReturn >= 0 {
			want := &CoreFuncType{Params: er}
			if sig := c.sp.coreFuncs[cd.opts.postReturn]; sig != nil && !sig.Equal(want) {
				failAt(r.path, off, CodeType, "post-return has type %s, want %s", sig, want)
			}
		}
		if sig := c.sp.coreFuncs[cd.fn]; sig != nil {
			want := &CoreFuncType{Params: ep, Results: er}
			if !sig.Equal(want) {
				failAt(r.path, off, CodeType, "canon lift of core func %d with type %s, but %s needs %s", cd.fn, sig, cd.typ.WIT(), want)
			}
		}
	} else {
		needRealloc = bufResults
		if cd.opts.postReturn >= 0 {
			failAt(r.path, off, CodeType, "canon lower does not take a post-return option")
		}
	}
	if needMem && cd.opts.memory < 0 {
		failAt(r.path, off, CodeType, "%s passes values through linear memory but names no memory option", cd.typ.WIT())
	}
	if needRealloc && cd.opts.realloc < 0 {
		failAt(r.path, off, CodeType, "%s allocates in the guest but names no realloc option", cd.typ.WIT())
	}
}
