package fleet_test

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/fleet"
	"github.com/tpsroute/tpsroute/route"
)

// A Client joins a fleet through Config.Fleet. Here Redis is miniredis, in
// process; a service gives the URL of its Redis.
func Example() {
	redis := miniredis.NewMiniRedis()
	if err := redis.Start(); err != nil {
		panic(err)
	}
	defer redis.Close()

	f, err := fleet.New(fleet.Options{URL: "redis://" + redis.Addr() + "/0", Name: "prod", Sync: 50 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer f.Close() // after the Client's last call
	_, err = tpsroute.New(tpsroute.Config{
		Deployments: []route.Deployment{{Provider: "groq", Model: "llama", BaseURL: "https://api.groq.com/openai/v1",
			Limits: route.Limits{RPM: 60}}},
		Fleet: f,
	})
	if err != nil {
		panic(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !f.Status(time.Now()).Connected && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	st := f.Status(time.Now())
	fmt.Println("fleet", st.Name, "schema", st.Schema, "connected", st.Connected)
	fmt.Println(redis.Exists("tpsroute:prod:replicas"))
	// Output:
	// fleet prod schema 1 connected true
	// true
}
