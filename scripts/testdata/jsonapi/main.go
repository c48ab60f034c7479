// Command jsonapi is the JSON API server scripts/bench-stats.sh loads:
// GET /items/{id} answers an item of an in-memory store as JSON. It
// prints the address it listens on, then serves until killed; with
// -trace FILE, under Go's execution tracer.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"runtime/trace"
	"strconv"
	"sync"
)

// Item is what the API serves.
type Item struct {
	ID    int      `json:"id"`
	Name  string   `json:"name"`
	Cents int64    `json:"price_cents"`
	Tax   int64    `json:"tax_cents"`
	Tags  []string `json:"tags"`
}

type store struct {
	mu    sync.RWMutex
	items map[int]Item
}

func newStore(n int) *store {
	s := &store{items: make(map[int]Item, n)}
	for id := range n {
		s.items[id] = Item{ID: id, Name: fmt.Sprintf("item %d", id), Cents: int64(100 + id%900), Tags: []string{"a", "b"}}
	}
	return s
}

var errNotFound = errors.New("no such item")

func (s *store) get(id int) (Item, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	it, ok := s.items[id]
	if !ok {
		return Item{}, errNotFound
	}
	return it, nil
}

// tax is the sales tax on cents, rounded half up.
func tax(cents int64) int64 { return (cents*8 + 50) / 100 }

func parseID(s string) (int, error) {
	id, err := strconv.Atoi(s)
	if err != nil || id < 0 {
		return 0, fmt.Errorf("bad item id %q", s)
	}
	return id, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Print(err)
	}
}

func (s *store) handleItem(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	it, err := s.get(id)
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	it.Tax = tax(it.Cents)
	writeJSON(w, http.StatusOK, it)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	traceTo := flag.String("trace", "", "write Go's execution trace (runtime/trace) to this file while serving")
	flag.Parse()
	if *traceTo != "" {
		// The benchmark's anchor: Go's own tracer on the same load. The
		// server is killed, so the trace is flushed as it goes.
		f, err := os.Create(*traceTo)
		if err != nil {
			log.Fatal(err)
		}
		if err := trace.Start(f); err != nil {
			log.Fatal(err)
		}
	}
	s := newStore(1000)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", s.handleItem)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
