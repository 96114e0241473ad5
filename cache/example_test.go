package cache_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/piperun/piperun/cache"
	"github.com/piperun/piperun/sample"
)

func Example() {
	dir, err := os.MkdirTemp("", "piperun-cache-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The first epoch writes every sample that passes the cache stage.
	meta := cache.Manifest{Pipeline: "demo", Stage: "cache", Describe: "range(3) | map label = index * 10"}
	c, err := cache.Open(dir, "3f9a2c", meta, cache.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for id := int64(0); id < 3; id++ {
		s := sample.New(id, 0, "")
		s.Fields["label"] = id * 10
		if err := c.Put(id, s); err != nil {
			log.Fatal(err)
		}
	}
	if err := c.Commit(); err != nil { // durable from here on
		log.Fatal(err)
	}
	if err := c.MarkComplete(); err != nil { // the epoch ended
		log.Fatal(err)
	}
	if err := c.Close(); err != nil {
		log.Fatal(err)
	}

	// A later run finds the complete cache and reads it in ID order.
	c, err = cache.Open(dir, "3f9a2c", meta, cache.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m := c.Manifest()
	fmt.Println("complete:", m.Complete, "samples:", m.Samples)
	err = c.Iterate(context.Background(), func(s *sample.Sample) error {
		fmt.Println(s.ID, s.Fields["label"])
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// complete: true samples: 3
	// 0 0
	// 1 10
	// 2 20
}
