module github.com/capsulegate/capsulegate/bench

go 1.26.0

require (
	github.com/bytecodealliance/wasmtime-go/v39 v39.0.1
	github.com/capsulegate/capsulegate v0.0.0-00010101000000-000000000000
)

replace github.com/capsulegate/capsulegate => ../
