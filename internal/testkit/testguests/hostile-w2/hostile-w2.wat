;; hostile-w2: a tool component written by hand that attacks the WASI 0.2 host through
;; the engine's component path, as a hostile component compiled by any toolchain could.
;; It imports wasi:io/streams and wasi:cli/stdout like the components wit-component
;; makes, and exports murmur:tool/run@0.1.0 (wit/murmur-tool-0.1.0.wit). The first byte
;; of its input data picks the attack, made with the handles and pointers it hands to
;; the lowered imports:
;;   "f"  write to a forged stream handle (0x7777)
;;   "z"  write through handle 0
;;   "u"  write to its stdout stream after dropping it
;;   "d"  drop its stdout stream twice
;;   "p"  write a list that lies past the end of memory
;;   "l"  write a list 2 GiB long
;;   "r"  write with a return area past the end of memory
;;   "n"  take its stdout stream 2 000 000 times, dropping none (the handle table)
;;   anything else: write "hello" to stdout, drop the stream and answer passed, "ok"
;;
;; Memory: 8 "hello"; 16 "ok"; 64 the tool-result (52 bytes); 256 the write's return
;; area; 1024 the heap, a bump allocator emptied by the post-return.
(component
  (type $ty-error (instance
    (export "error" (type (sub resource)))))
  (import "wasi:io/error@0.2.6" (instance $error (type $ty-error)))
  (alias export $error "error" (type $error-res))
  (type $ty-streams (instance
    (export "output-stream" (type (sub resource)))
    (alias outer 1 $error-res (type))
    (export "error" (type (eq 1)))
    (type (own 2))
    (type (variant (case "last-operation-failed" 3) (case "closed")))
    (export "stream-error" (type (eq 4)))
    (type (borrow 0))
    (type (list u8))
    (type (result (error 5)))
    (type (func (param "self" 6) (param "contents" 7) (result 8)))
    (export "[method]output-stream.write" (func (type 9)))))
  (import "wasi:io/streams@0.2.6" (instance $streams (type $ty-streams)))
  (alias export $streams "output-stream" (type $output-stream))
  (type $ty-stdout (instance
    (alias outer 1 $output-stream (type))
    (export "output-stream" (type (eq 0)))
    (type (own 1))
    (type (func (result 2)))
    (export "get-stdout" (func (type 3)))))
  (import "wasi:cli/stdout@0.2.6" (instance $stdout (type $ty-stdout)))

  (core module $main
    (import "wasi:cli/stdout@0.2.0" "get-stdout" (func $get (result i32)))
    (import "wasi:io/streams@0.2.0" "[method]output-stream.write" (func $write (param i32 i32 i32 i32)))
    (import "wasi:io/streams@0.2.0" "[resource-drop]output-stream" (func $drop (param i32)))
    (memory (export "memory") 1)
    (global $heap (mut i32) (i32.const 1024))
    (data (i32.const 8) "hello")
    (data (i32.const 16) "ok")

    ;; cabi_realloc: a bump allocator that grows memory as needed, trapping past 4 GiB.
    (func $realloc (export "cabi_realloc")
      (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
      (local $p i32) (local $end i64) (local $need i64)
      (if (i32.eqz (local.get $align)) (then (local.set $align (i32.const 1))))
      (local.set $p
        (i32.and
          (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get $align))))
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

    ;; run(data: option<string>, log-path: option<string>) -> tool-result, flattened.
    (func (export "murmur:tool/run@0.1.0#run")
      (param $has i32) (param $data i32) (param $len i32) (param i32 i32 i32)
      (result i32)
      (local $c i32) (local $h i32) (local $i i32)
      (memory.fill (i32.const 64) (i32.const 0) (i32.const 52))
      (if (i32.and (local.get $has) (i32.ne (local.get $len) (i32.const 0)))
        (then (local.set $c (i32.load8_u (local.get $data)))))
      (block $attacked
        (if (i32.eq (local.get $c) (i32.const 0x66)) ;; f
          (then (call $write (i32.const 0x7777) (i32.const 8) (i32.const 5) (i32.const 256)) (br $attacked)))
        (if (i32.eq (local.get $c) (i32.const 0x7a)) ;; z
          (then (call $write (i32.const 0) (i32.const 8) (i32.const 5) (i32.const 256)) (br $attacked)))
        (if (i32.eq (local.get $c) (i32.const 0x75)) ;; u
          (then
            (local.set $h (call $get))
            (call $drop (local.get $h))
            (call $write (local.get $h) (i32.const 8) (i32.const 5) (i32.const 256))
            (br $attacked)))
        (if (i32.eq (local.get $c) (i32.const 0x64)) ;; d
          (then
            (local.set $h (call $get))
            (call $drop (local.get $h))
            (call $drop (local.get $h))
            (br $attacked)))
        (if (i32.eq (local.get $c) (i32.const 0x70)) ;; p
          (then
            (call $write (call $get) (i32.const 0xffffff00) (i32.const 0x1000) (i32.const 256))
            (br $attacked)))
        (if (i32.eq (local.get $c) (i32.const 0x6c)) ;; l
          (then
            (call $write (call $get) (i32.const 8) (i32.const 0x7fffffff) (i32.const 256))
            (br $attacked)))
        (if (i32.eq (local.get $c) (i32.const 0x72)) ;; r
          (then
            (call $write (call $get) (i32.const 8) (i32.const 5) (i32.const 0xfffffff8))
            (br $attacked)))
        (if (i32.eq (local.get $c) (i32.const 0x6e)) ;; n
          (then
            (loop $more
              (drop (call $get))
              (local.set $i (i32.add (local.get $i) (i32.const 1)))
              (br_if $more (i32.lt_u (local.get $i) (i32.const 2000000))))
            (br $attacked)))
        ;; A well-formed call.
        (local.set $h (call $get))
        (call $write (local.get $h) (i32.const 8) (i32.const 5) (i32.const 256))
        (call $drop (local.get $h)))
      ;; passed, data some("ok")
      (i32.store8 (i32.const 80) (i32.const 1))
      (i32.store (i32.const 84) (i32.const 16))
      (i32.store (i32.const 88) (i32.const 2))
      (i32.const 64))

    (func (export "cabi_post_murmur:tool/run@0.1.0#run") (param i32)
      (global.set $heap (i32.const 1024))))

  ;; The write needs main's memory, which exists only once main does: main imports it
  ;; through the shim's table, which the fixup fills with the lowered write.
  (core module $shim
    (type $w (func (param i32 i32 i32 i32)))
    (table (export "$imports") 1 1 funcref)
    (func (export "0") (type $w)
      local.get 0 local.get 1 local.get 2 local.get 3 i32.const 0 call_indirect (type $w)))
  (core module $fixup
    (type $w (func (param i32 i32 i32 i32)))
    (import "" "0" (func $f (type $w)))
    (import "" "$imports" (table 1 1 funcref))
    (elem (i32.const 0) func $f))
  (core instance $shim-i (instantiate $shim))

  (alias export $streams "output-stream" (type $os))
  (core func $drop (canon resource.drop $os))
  (alias core export $shim-i "0" (core func $indirect-write))
  (core instance $streams-bag
    (export "[method]output-stream.write" (func $indirect-write))
    (export "[resource-drop]output-stream" (func $drop)))
  (alias export $stdout "get-stdout" (func $get-stdout))
  (core func $get-stdout-lowered (canon lower (func $get-stdout)))
  (core instance $stdout-bag (export "get-stdout" (func $get-stdout-lowered)))
  (core instance $main-i (instantiate $main
    (with "wasi:cli/stdout@0.2.0" (instance $stdout-bag))
    (with "wasi:io/streams@0.2.0" (instance $streams-bag))))
  (alias core export $main-i "memory" (core memory $memory))
  (alias core export $main-i "cabi_realloc" (core func $realloc))
  (alias core export $shim-i "$imports" (core table $table))
  (alias export $streams "[method]output-stream.write" (func $write))
  (core func $write-lowered (canon lower (func $write) (memory $memory)))
  (core instance $fixup-args
    (export "$imports" (table $table))
    (export "0" (func $write-lowered)))
  (core instance (instantiate $fixup (with "" (instance $fixup-args))))

  (type $status (enum "passed" "failed" "error"))
  (type $ostr (option string))
  (type $input (record (field "data" $ostr) (field "log-path" $ostr)))
  (type $pair (tuple string string))
  (type $pairs (list $pair))
  (type $output (record (field "status" $status) (field "summary" $ostr) (field "data" $ostr)
    (field "data-path" $ostr) (field "truncated" bool) (field "metadata" $pairs)))
  (type $run-ty (func (param "input" $input) (result $output)))
  (alias core export $main-i "murmur:tool/run@0.1.0#run" (core func $run-core))
  (alias core export $main-i "cabi_post_murmur:tool/run@0.1.0#run" (core func $post))
  (func $run (type $run-ty) (canon lift (core func $run-core) (memory $memory) (realloc $realloc) string-encoding=utf8 (post-return $post)))

  ;; The interface instance, with its named types, as wit-component nests it.
  (component $shim-component
    (type $st (enum "passed" "failed" "error"))
    (import "import-type-status" (type $st-i (eq $st)))
    (type $os (option string))
    (type $in (record (field "data" $os) (field "log-path" $os)))
    (import "import-type-tool-input" (type $in-i (eq $in)))
    (type $pair (tuple string string))
    (type $pairs (list $pair))
    (type $out (record (field "status" $st-i) (field "summary" $os) (field "data" $os)
      (field "data-path" $os) (field "truncated" bool) (field "metadata" $pairs)))
    (import "import-type-tool-result" (type $out-i (eq $out)))
    (type $f (func (param "input" $in-i) (result $out-i)))
    (import "import-func-run" (func $imported (type $f)))
    (type $st2 (enum "passed" "failed" "error"))
    (export $st-e "status" (type $st2))
    (type $in2 (record (field "data" $os) (field "log-path" $os)))
    (export $in-e "tool-input" (type $in2))
    (type $out2 (record (field "status" $st-e) (field "summary" $os) (field "data" $os)
      (field "data-path" $os) (field "truncated" bool) (field "metadata" $pairs)))
    (export $out-e "tool-result" (type $out2))
    (type $f2 (func (param "input" $in-e) (result $out-e)))
    (export "run" (func $imported) (func (type $f2))))
  (instance $reexport (instantiate $shim-component
    (with "import-func-run" (func $run))
    (with "import-type-status" (type $status))
    (with "import-type-tool-input" (type $input))
    (with "import-type-tool-result" (type $output))))
  (export "murmur:tool/run@0.1.0" (instance $reexport))
)
