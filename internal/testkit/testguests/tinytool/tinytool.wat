;; tinytool: a tool guest written by hand in the WebAssembly text format, a few hundred
;; bytes once assembled. It implements murmur:tool/run@0.1.0 (wit/murmur-tool-0.1.0.wit)
;; without any SDK: it returns its input data uppercased (ASCII letters only) with one
;; metadata pair ("len", the input's byte length), like the Go benchtool guest, so the
;; two can be benchmarked side by side.
;;
;; Three inputs make it break the canonical ABI on purpose, for tests that check the
;; host refuses a malformed result from it as from any guest:
;;   "!p"  data points past the end of memory
;;   "!u"  data is not UTF-8
;;   "!s"  the status discriminant is 7 (the enum has 3 cases)
;; No input data at all gives status failed with a summary.
;;
;; Layout of memory (one page to start):
;;   8     "len", the metadata key
;;   16    the summary for a missing input
;;   48    two bytes that are not UTF-8
;;   64    the tool-result (52 bytes, alignment 4; docs/reference/guest-abi.md)
;;   128   the metadata list: one pair of strings (16 bytes)
;;   1024  the heap: a bump allocator, emptied after every call by cabi_post
(module
  (memory (export "memory") 1)

  (global $heap_base i32 (i32.const 1024))
  (global $heap (mut i32) (i32.const 1024))

  (data (i32.const 8) "len")
  (data (i32.const 16) "tinytool: no input data")
  (data (i32.const 48) "\ff\fe")

  ;; Nothing to set up, but a reactor's _initialize is what lets the engine take an init
  ;; snapshot of the module, and only modules with one are kept warm between calls.
  (func (export "_initialize")
    (global.set $heap (global.get $heap_base)))

  ;; cabi_realloc(old_ptr, old_size, align, new_size): bump-allocates, copying the old
  ;; bytes when asked to grow an allocation. Running out of memory traps, so the host
  ;; classifies it memory_limit rather than reading a bogus pointer.
  (func $realloc (export "cabi_realloc")
    (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $p i32) (local $end i64) (local $need i64)
    (if (i32.eqz (local.get $align)) (then (local.set $align (i32.const 1))))
    (local.set $p
      (i32.and
        (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get $align))))
    ;; 64-bit arithmetic: an end past 4 GiB must trap, not wrap.
    (local.set $end (i64.add (i64.extend_i32_u (local.get $p)) (i64.extend_i32_u (local.get $size))))
    (local.set $need (i64.shr_u (i64.add (local.get $end) (i64.const 65535)) (i64.const 16)))
    (if (i64.gt_u (local.get $need) (i64.extend_i32_u (memory.size)))
      (then
        (if (i64.gt_u (local.get $need) (i64.const 65536)) (then unreachable))
        (if (i32.eq
              (memory.grow (i32.wrap_i64 (i64.sub (local.get $need) (i64.extend_i32_u (memory.size)))))
              (i32.const -1))
          (then unreachable))))
    (if (i32.ne (local.get $old) (i32.const 0))
      (then
        (memory.copy (local.get $p) (local.get $old)
          (select (local.get $old_size) (local.get $size)
            (i32.lt_u (local.get $old_size) (local.get $size))))))
    (global.set $heap (i32.wrap_i64 (local.get $end)))
    (local.get $p))

  ;; setData stores option<string> some(ptr, len) at the tool-result's data field.
  (func $setData (param $ptr i32) (param $len i32)
    (i32.store8 (i32.const 80) (i32.const 1))
    (i32.store (i32.const 84) (local.get $ptr))
    (i32.store (i32.const 88) (local.get $len)))

  ;; clearResult writes an empty passed tool-result at 64.
  (func $clearResult
    (memory.fill (i32.const 64) (i32.const 0) (i32.const 52)))

  ;; run(data: option<string>, log-path: option<string>) -> tool-result, flattened:
  ;; each option is a discriminant, a pointer and a length; the result is returned
  ;; through memory, as a pointer to it.
  (func (export "murmur:tool/run@0.1.0#run")
    (param $has_data i32) (param $data i32) (param $len i32)
    (param $has_log i32) (param $log i32) (param $log_len i32)
    (result i32)
    (local $out i32) (local $i i32) (local $c i32) (local $n i32) (local $digits i32)
    (call $clearResult)

    (if (i32.eqz (local.get $has_data))
      (then
        (i32.store8 (i32.const 64) (i32.const 1)) ;; status failed
        (i32.store8 (i32.const 68) (i32.const 1)) ;; summary some(...)
        (i32.store (i32.const 72) (i32.const 16))
        (i32.store (i32.const 76) (i32.const 23))
        (return (i32.const 64))))

    (if (i32.and
          (i32.eq (local.get $len) (i32.const 2))
          (i32.eq (i32.load8_u (local.get $data)) (i32.const 0x21))) ;; '!'
      (then
        (local.set $c (i32.load8_u offset=1 (local.get $data)))
        (if (i32.eq (local.get $c) (i32.const 0x70)) ;; 'p'
          (then
            (call $setData (i32.const 0xfffffff0) (i32.const 32))
            (return (i32.const 64))))
        (if (i32.eq (local.get $c) (i32.const 0x75)) ;; 'u'
          (then
            (call $setData (i32.const 48) (i32.const 2))
            (return (i32.const 64))))
        (if (i32.eq (local.get $c) (i32.const 0x73)) ;; 's'
          (then
            (i32.store8 (i32.const 64) (i32.const 7))
            (return (i32.const 64))))))

    ;; The data, uppercased into a new string.
    (local.set $out (call $realloc (i32.const 0) (i32.const 0) (i32.const 1) (local.get $len)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $c (i32.load8_u (i32.add (local.get $data) (local.get $i))))
        (if (i32.lt_u (i32.sub (local.get $c) (i32.const 0x61)) (i32.const 26)) ;; 'a'..'z'
          (then (local.set $c (i32.sub (local.get $c) (i32.const 32)))))
        (i32.store8 (i32.add (local.get $out) (local.get $i)) (local.get $c))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $setData (local.get $out) (local.get $len))

    ;; The length in decimal: count the digits, then write them from the right.
    (local.set $n (local.get $len))
    (local.set $digits (i32.const 1))
    (block $counted
      (loop $count
        (br_if $counted (i32.lt_u (local.get $n) (i32.const 10)))
        (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
        (local.set $digits (i32.add (local.get $digits) (i32.const 1)))
        (br $count)))
    (local.set $out (call $realloc (i32.const 0) (i32.const 0) (i32.const 1) (local.get $digits)))
    (local.set $n (local.get $len))
    (local.set $i (local.get $digits))
    (loop $digit
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (i32.add (local.get $out) (local.get $i))
        (i32.add (i32.const 0x30) (i32.rem_u (local.get $n) (i32.const 10))))
      (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
      (br_if $digit (i32.gt_u (local.get $i) (i32.const 0))))

    ;; metadata: [("len", digits)]
    (i32.store (i32.const 128) (i32.const 8))
    (i32.store (i32.const 132) (i32.const 3))
    (i32.store (i32.const 136) (local.get $out))
    (i32.store (i32.const 140) (local.get $digits))
    (i32.store (i32.const 108) (i32.const 128))
    (i32.store (i32.const 112) (i32.const 1))
    (i32.const 64))

  ;; Called once the host has read the result: everything the call allocated is free.
  (func (export "cabi_post_murmur:tool/run@0.1.0#run") (param i32)
    (global.set $heap (global.get $heap_base)))
)
