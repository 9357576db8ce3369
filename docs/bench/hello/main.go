// Command hello is the reference of docs/benchmarks.md: a hello-world
// net/http handler, measured with the same wrk settings as the appliance's
// audited reads so that the ratio of the two says what the appliance's work
// per request costs on the machine at hand.
//
//	go run ./docs/bench/hello -listen 127.0.0.1:8081
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to listen on")
	flag.Parse()
	log.Fatal(http.ListenAndServe(*listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("Hello, world!\n"))
	})))
}
