// A Go client of inboxd from the contract alone (protos/): accept an event, claim it, record one
// external action (INTENDED, then SUCCEEDED, under the key the server minted), and complete it.
//
// Built by scripts/go-example.sh with Debian's Go toolchain and packages; see docs/other-languages.md.
//
//	inboxd-go-example -target 127.0.0.1:50051 -namespace examples/go [-token TOKEN]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	inboxdv1 "github.com/inboxd/inboxd/gen/go/inboxd/v1"
)

func main() {
	target := flag.String("target", envOr("INBOXD_TARGET", "127.0.0.1:50051"), "inboxd's host:port")
	namespace := flag.String("namespace", "examples/go", "the namespace to accept into and claim from")
	key := flag.String("key", fmt.Sprintf("go-example-%d", time.Now().UnixNano()), "the event key")
	token := flag.String("token", os.Getenv("INBOXD_TOKEN"), "a bearer token (inboxd with a tokens file)")
	flag.Parse()
	if err := run(*target, *namespace, *key, *token); err != nil {
		fmt.Fprintln(os.Stderr, "inboxd-go-example:", err)
		os.Exit(1)
	}
}

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func run(target, namespace, key, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	// Plaintext, as inboxd serves loopback by default; pass TLS credentials for anything else.
	conn, err := grpc.DialContext(ctx, target, grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", target, err)
	}
	defer conn.Close()
	inbox := inboxdv1.NewInboxServiceClient(conn)

	// Answered only after the commit: a retry of the same key answers DUPLICATE, never a second event.
	accepted, err := inbox.Accept(ctx, &inboxdv1.AcceptRequest{
		Namespace: namespace, EventKey: key, EventType: "example.created",
		Payload: []byte(`{"greeting":"hello from Go"}`), ContentType: "application/json",
	})
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	fmt.Printf("accepted %s: %s\n", key, accepted.Outcome)

	claimed, err := inbox.Claim(ctx, &inboxdv1.ClaimRequest{
		Namespaces: []string{namespace}, MaxEvents: 1,
		Lease: durationpb.New(30 * time.Second), Wait: durationpb.New(5 * time.Second),
		WorkerId: "go-example",
	})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if len(claimed.Events) != 1 {
		return fmt.Errorf("claim: %d events, wanted 1", len(claimed.Events))
	}
	event := claimed.Events[0]
	fmt.Printf("claimed %s: attempt %d, fencing token %d\n", event.EventKey, event.Attempt, event.FencingToken)

	// Every call after the claim carries its token: a stale worker's call is refused (ABORTED).
	intended, err := inbox.RecordActionOutcome(ctx, &inboxdv1.RecordActionOutcomeRequest{
		Namespace: event.Namespace, EventKey: event.EventKey, ClaimToken: event.ClaimToken,
		Action: "send-greeting:v1", State: inboxdv1.ActionState_ACTION_STATE_INTENDED,
	})
	if err != nil {
		return fmt.Errorf("record INTENDED: %w", err)
	}
	// The downstream call goes here, with this key, the same on every retry of this action.
	idempotencyKey := intended.Action.IdempotencyKey
	fmt.Printf("action send-greeting:v1 intended, idempotency key %s\n", idempotencyKey)
	if _, err := inbox.RecordActionOutcome(ctx, &inboxdv1.RecordActionOutcomeRequest{
		Namespace: event.Namespace, EventKey: event.EventKey, ClaimToken: event.ClaimToken,
		Action: "send-greeting:v1", State: inboxdv1.ActionState_ACTION_STATE_SUCCEEDED,
		ExternalRef: "greeting-" + idempotencyKey,
	}); err != nil {
		return fmt.Errorf("record SUCCEEDED: %w", err)
	}
	if _, err := inbox.Complete(ctx, &inboxdv1.CompleteRequest{
		Namespace: event.Namespace, EventKey: event.EventKey, ClaimToken: event.ClaimToken,
		Disposition: inboxdv1.Disposition_DISPOSITION_APPLIED,
	}); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	fmt.Printf("completed %s\n", event.EventKey)
	return nil
}
