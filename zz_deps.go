package main
import (
 _ "github.com/coder/websocket"
 _ "github.com/jackc/pgx/v5"
 _ "github.com/jackc/pgx/v5/pgxpool"
 _ "modernc.org/sqlite"
 _ "github.com/pressly/goose/v3"
 _ "github.com/goccy/go-yaml"
 _ "github.com/spf13/cobra"
 _ "github.com/bmatcuk/doublestar/v4"
 _ "github.com/google/uuid"
)
func main(){}
