// gopeer: the compiled peer of bench/bench.py, scenario 2. It uploads each file named in a
// listing as multipart/form-data (field "file", the file's base name), the way `curl -F` and the
// Python requests loop do, with Go's net/http client and keep-alive connections, from N workers.
// It keeps nothing durable. It prints the seconds from its first request to its last answer.
//
//	go run ./bench/gopeer -url http://127.0.0.1:PORT/upload -workers 4 files.txt
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "where to POST each file")
	workers := flag.Int("workers", 1, "uploads in flight at once")
	flag.Parse()
	if *url == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gopeer -url URL [-workers N] LISTING")
		os.Exit(2)
	}
	paths, err := readListing(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: *workers, MaxConnsPerHost: *workers}
	client := &http.Client{Transport: transport}
	work := make(chan string)
	failures := make(chan error, *workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range work {
				if err := upload(client, *url, path); err != nil {
					failures <- err
					return
				}
			}
		}()
	}
	for _, path := range paths {
		select {
		case err := <-failures:
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		case work <- path:
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-failures:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	default:
	}
	fmt.Printf("%.6f\n", elapsed.Seconds())
}

func readListing(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var paths []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if line := scanner.Text(); line != "" {
			paths = append(paths, line)
		}
	}
	return paths, scanner.Err()
}

// upload sends one file as a multipart form, as `curl -F file=@path` does.
func upload(client *http.Client, url, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	part, err := form.CreateFormFile("file", filepath.Base(path))
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, f); err != nil {
		return err
	}
	if err := form.Close(); err != nil {
		return err
	}
	response, err := client.Post(url, form.FormDataContentType(), &body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	io.Copy(io.Discard, response.Body)
	response.Body.Close()
	if response.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", path, response.Status)
	}
	return nil
}
