// Package redistest gives tests a real redis-server on 127.0.0.1: the one
// .ci/run starts (its address in TPSROUTE_REDIS_ADDR), or one a test starts
// and stops itself from the redis-server on PATH.
//
// Outside CI a test without Redis is skipped with a message saying how to
// run it; in CI (TPSROUTE_CI set, as .ci/run does) it fails instead.
//
// # Users
//
// fleet's Redis tests and benchmarks share the server of .ci/run (Addr);
// examples/gateway's fleet test starts one of its own (Start), stops it to
// see the replicas keep serving through the outage, and starts it again
// (Server.Restart, same address, empty) to see them rejoin. A Server binds
// 127.0.0.1 only, keeps nothing on disk (no RDB, no AOF, its directory a
// test's temporary one), and is killed when its test ends. The package is
// internal: it is a test helper of this module.
//
// A Server belongs to the test that started it; its methods are not safe
// for concurrent use.
package redistest
