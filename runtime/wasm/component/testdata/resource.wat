;; A component that defines a resource (with a destructor) and exports it with a
;; constructor and a method; it also imports a resource type directly and a function
;; taking a borrow of it.
(component
  (import "blob" (type $blob (sub resource)))
  (type $blob-borrow (borrow $blob))
  (type $size-ty (func (param "b" $blob-borrow) (result u64)))
  (import "blob-size" (func $blob-size (type $size-ty)))

  (core module $dtor-m
    (func (export "dtor") (param i32)))
  (core instance $dtor-i (instantiate $dtor-m))
  (alias core export $dtor-i "dtor" (core func $dtor))
  (type $counter (resource (rep i32) (dtor (core func $dtor))))
  (core func $new (canon resource.new $counter))
  (core func $rep (canon resource.rep $counter))
  (core func $drop (canon resource.drop $counter))
  (core func $drop-blob (canon resource.drop $blob))
  (core func $size (canon lower (func $blob-size)))
  (core instance $host
    (export "new" (func $new))
    (export "rep" (func $rep))
    (export "drop" (func $drop))
    (export "drop-blob" (func $drop-blob))
    (export "blob-size" (func $size)))
  (core module $main
    (import "host" "new" (func (param i32) (result i32)))
    (import "host" "rep" (func (param i32) (result i32)))
    (import "host" "drop" (func (param i32)))
    (import "host" "drop-blob" (func (param i32)))
    (import "host" "blob-size" (func (param i32) (result i64)))
    (func (export "make") (result i32) i32.const 0)
    (func (export "get") (param i32) (result i32) i32.const 0))
  (core instance $main-i (instantiate $main (with "host" (instance $host))))

  (export $counter-e "counter" (type $counter))
  (type $own (own $counter-e))
  (type $borrow (borrow $counter-e))
  (type $make-ty (func (result $own)))
  (type $get-ty (func (param "self" $borrow) (result u32)))
  (alias core export $main-i "make" (core func $make-core))
  (alias core export $main-i "get" (core func $get-core))
  (func $make (type $make-ty) (canon lift (core func $make-core)))
  (func $get (type $get-ty) (canon lift (core func $get-core)))
  (export "[constructor]counter" (func $make))
  (export "[method]counter.get" (func $get))
)
