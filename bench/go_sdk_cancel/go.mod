module soulwire.bench/go_sdk_cancel

go 1.25

require (
	github.com/MoonshotAI/kimi-agent-sdk/go v0.2.0
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/x5iu/defc v1.44.5
	go.uber.org/mock v0.6.0
	golang.org/x/text v0.32.0
)
