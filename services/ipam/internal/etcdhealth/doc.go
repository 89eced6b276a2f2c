// Package etcdhealth keeps an eye on etcd's backend for a replica: it
// exports the backend's size against its quota and etcd's NOSPACE alarm as
// metrics (an alert can then fire well before etcd refuses writes), and
// defragments a member whose file has become mostly free pages, one member
// at a time and no more often than a minimum interval. Compaction frees
// pages inside the file; only a defragmentation gives them back, and the
// quota counts the file.
package etcdhealth
