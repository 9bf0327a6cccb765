;; A minimal tool in the shape wit-component emits: WASI instance imports with
;; resources, a main module, a shim module whose table the fixup module fills with
;; lowered functions that need main's memory, export bags, a lift with memory, realloc
;; and post-return, and a nested component that re-exports the lifted function with
;; named types.
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
    (import "wasi:cli/stdout@0.2.0" "get-stdout" (func (result i32)))
    (import "wasi:io/streams@0.2.0" "[method]output-stream.write" (func (param i32 i32 i32 i32)))
    (import "wasi:io/streams@0.2.0" "[resource-drop]output-stream" (func (param i32)))
    (memory (export "memory") 1)
    (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) i32.const 1024)
    (func (export "murmur:tool/run@0.1.0#run") (param i32 i32) (result i32) i32.const 0)
    (func (export "cabi_post_murmur:tool/run@0.1.0#run") (param i32)))
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

  (type $input (record (field "data" string)))
  (type $status (enum "passed" "failed"))
  (type $output (record (field "status" $status) (field "summary" string)))
  (type $run-ty (func (param "input" $input) (result $output)))
  (alias core export $main-i "murmur:tool/run@0.1.0#run" (core func $run-core))
  (alias core export $main-i "cabi_post_murmur:tool/run@0.1.0#run" (core func $post))
  (func $run (type $run-ty) (canon lift (core func $run-core) (memory $memory) (realloc $realloc) string-encoding=utf8 (post-return $post)))

  (component $shim-component
    (type $in (record (field "data" string)))
    (import "import-type-tool-input" (type $in-i (eq $in)))
    (type $st (enum "passed" "failed"))
    (import "import-type-status" (type $st-i (eq $st)))
    (type $out (record (field "status" $st-i) (field "summary" string)))
    (import "import-type-tool-result" (type $out-i (eq $out)))
    (type $f (func (param "input" $in-i) (result $out-i)))
    (import "import-func-run" (func $imported (type $f)))
    (export $in-e "tool-input" (type $in))
    (type $st2 (enum "passed" "failed"))
    (export $st-e "status" (type $st2))
    (type $out2 (record (field "status" $st-e) (field "summary" string)))
    (export $out-e "tool-result" (type $out2))
    (type $f2 (func (param "input" $in-e) (result $out-e)))
    (export "run" (func $imported) (func (type $f2))))
  (instance $reexport (instantiate $shim-component
    (with "import-func-run" (func $run))
    (with "import-type-tool-input" (type $input))
    (with "import-type-status" (type $status))
    (with "import-type-tool-result" (type $output))))
  (export "murmur:tool/run@0.1.0" (instance $reexport))
)
