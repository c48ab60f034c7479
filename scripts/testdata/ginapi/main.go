// Command ginapi is the gin JSON server scripts/bench-untraced.sh loads:
// GET /items/:id answers an item of an in-memory store as JSON. It prints
// the address it listens on, then serves until killed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// Item is what the API serves.
type Item struct {
	ID    int      `json:"id"`
	Name  string   `json:"name"`
	Cents int64    `json:"price_cents"`
	Tags  []string `json:"tags"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	gin.SetMode(gin.ReleaseMode)
	items := make([]Item, 1000)
	for id := range items {
		items[id] = Item{ID: id, Name: fmt.Sprintf("item %d", id), Cents: int64(100 + id%900), Tags: []string{"a", "b"}}
	}
	r := gin.New()
	r.GET("/items/:id", func(c *gin.Context) {
		id, err := strconv.Atoi(c.Param("id"))
		if err != nil || id < 0 || id >= len(items) {
			c.JSON(http.StatusNotFound, gin.H{"error": "no such item"})
			return
		}
		c.JSON(http.StatusOK, items[id])
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on", ln.Addr())
	log.Fatal(http.Serve(ln, r))
}
