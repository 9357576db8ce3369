package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"backstop/app"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// loadConfig reads the embedded defaults, then the YAML file (if any), then
// SERVICE_* environment variables (SERVICE_ + key path in upper snake case,
// e.g. SERVICE_WEBHOOK_ALLOW_PRIVATE), then flags, and validates the result.
// Unknown keys in the file are an error naming the key: a typo must not
// silently fall back to a default.
func loadConfig(file, dataDir string, getenv func(string) string) (app.Config, error) {
	cfg := app.DefaultConfig()
	v := viper.New()
	v.SetConfigType("yaml")
	for key, val := range flatten(reflect.ValueOf(cfg), "") {
		v.SetDefault(key, val)
		envName := "SERVICE_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		if s := getenv(envName); s != "" {
			v.Set(key, s) // Set outranks the file: the environment wins
		}
	}
	if file == "" {
		file = getenv("SERVICE_CONFIG")
	}
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		defer f.Close()
		if err := v.MergeConfig(f); err != nil {
			return cfg, fmt.Errorf("config: %s: %w", file, err)
		}
	}
	if dataDir != "" {
		v.Set("data_dir", dataDir)
	}
	err := v.UnmarshalExact(&cfg, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.StringToTimeDurationHookFunc(), mapstructure.StringToSliceHookFunc(","))))
	if err != nil {
		return cfg, fmt.Errorf("config: %s", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	// Everything below the data directory is named by absolute paths, so
	// that tools run in another working directory (restic restoring into a
	// temporary directory) find the same files.
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return cfg, fmt.Errorf("config: data_dir: %w", err)
	}
	cfg.DataDir = abs
	return cfg, nil
}

// flatten lists every leaf key of the config (dotted mapstructure names)
// with its default value.
func flatten(v reflect.Value, prefix string) map[string]any {
	out := map[string]any{}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name := t.Field(i).Tag.Get("mapstructure")
		if name == "" {
			continue
		}
		key := prefix + name
		if f := v.Field(i); f.Kind() == reflect.Struct && f.Type().String() != "time.Duration" {
			for k, val := range flatten(f, key+".") {
				out[k] = val
			}
		} else {
			out[key] = f.Interface()
		}
	}
	return out
}

// configFlags adds the flags every data-directory command takes.
func configFlags(fs *flag.FlagSet) (file, dataDir *string) {
	return fs.String("config", "", "YAML configuration file (default: embedded defaults)"),
		fs.String("data-dir", "", "data directory (overrides data_dir)")
}

// parseFlags parses args, turning flag errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(new(strings.Builder))
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageError{fmt.Sprintf("usage of %s:\n%s", fs.Name(), flagUsage(fs))}
		}
		return usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

func flagUsage(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}
