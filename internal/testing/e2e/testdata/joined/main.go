// Command joined is a shop's HTTP server that a gateway calls with W3C
// trace context: every request carries a traceparent header, a tracestate
// and a tenant. It serves requests from its own client and prints each
// answer, so that a traced run can be compared with a plain one:
//
//	joined [N [IDLE]]
//
// serves N requests (200), then sleeps IDLE (none) before it exits.
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"
)

type order struct {
	ID       int
	Customer *customer
}

type customer struct{ Name string }

func serve(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/orders/"))
	o := &order{ID: id}
	// Every fourth order has no customer, which the rules' attribute
	// o.Customer.Name dereferences.
	if id%4 != 0 {
		o.Customer = &customer{Name: "c" + strconv.Itoa(id%7)}
	}
	if err := check(o); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	fmt.Fprintln(w, price(o))
}

// check stays a call: inlined and probed (inline: probe), its error
// escapes to the heap at the call, where the plain build's does not,
// which TestAttributesNoEscape is not about.
//
//go:noinline
func check(o *order) error {
	if o.ID%10 == 9 {
		return errors.New("order on hold")
	}
	return nil
}

func price(o *order) int {
	n := 0
	for i := range 1000 * (o.ID%5 + 1) {
		n += i % 7
	}
	return n
}

// TraceParent is the header request i carries: its trace id and the
// gateway's span id end in i, and every tenth request from the fifth is
// not sampled.
func TraceParent(i int) string {
	flags := "01"
	if i%10 == 5 {
		flags = "00"
	}
	return fmt.Sprintf("00-4bf92f3577b34da6a3ce929d%06x00-00f067aa0b%06x-%s", i, i, flags)
}

func main() {
	n := 200
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	srv := httptest.NewServer(http.HandlerFunc(serve))
	defer srv.Close()
	for i := range n {
		req, err := http.NewRequest("GET", srv.URL+"/orders/"+strconv.Itoa(i), nil)
		if err != nil {
			panic(err)
		}
		req.Header.Set("Traceparent", TraceParent(i))
		req.Header.Set("Tracestate", "shop=o"+strconv.Itoa(i))
		req.Header.Set("X-Tenant", "t"+strconv.Itoa(i%3))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Printf("%d %d %s", i, res.StatusCode, body)
	}
	if len(os.Args) > 2 {
		idle, _ := time.ParseDuration(os.Args[2])
		time.Sleep(idle)
	}
}
