// Package rewrite turns the equality delete files of an Iceberg table into
// position deletes through an index: deletion vectors on v3 tables,
// position delete files on v2 tables. It is a conductor beside the updater:
// it drives the planner (which rows an index snapshot says are live), the
// updater (to bring the index up to the table first) and iceberg-go's
// commits.
//
// Why the positions come from the live rows, not from the deleted keys: an
// index snapshot holds exactly the live rows of its table snapshot, so the
// rows an equality delete removes are precisely the ones it does not hold.
// Looking the delete's keys up in the index would find the surviving
// versions (in newer data files), never the deleted ones. What the index
// does know exactly is which positions of each data file are live; every
// other position of a file that an equality delete applies to is deleted,
// by that delete or another. So the new deletion vector of such a file is
// its existing deletes plus every position the index does not hold, and
// then every equality delete that applied to it is redundant. The rewrite
// therefore changes no live row: the table scans the same before and
// after, and the index of the new snapshot is the index of the old one.
//
// The commit is one catalog commit of two snapshots (iceberg-go v0.7.0's
// row delta adds delete files and replaces deletion vectors but cannot
// remove equality delete files, and its rewrite refuses to replace
// equality deletes by position deletes): a row delta that adds the new
// deletion vectors or position delete files and removes the vectors they
// replace, then a replace snapshot that removes the equality delete files
// and the position delete files now redundant. Neither changes a live row.
// The commit asserts the table's head; when another writer committed
// first, the plan is checked against what landed: it still holds unless a
// data file it writes deletes for lost or gained position deletes or was
// removed, a file it removes is gone, or an equality delete it removes now
// applies to a data file it did not cover. Then it commits on the new head;
// otherwise it is planned again on it, up to Options.MaxAttempts times.
//
// A plan made on an older snapshot than the head (Options.AtIndexed) is
// checked the same way before anything is written, with two allowances
// when no snapshot since, other than a rewrite's, removed a file (by their
// summaries): the equality delete files a rewrite since removed are left
// out of the plan (their rows are in that rewrite's position deletes), and
// a data file that got position deletes since (a deletion vector, a
// position delete file) gets new ones holding both (rebase): every
// position in either is deleted at the head.
// So a rewrite can follow an index that lags behind an earlier rewrite.
//
// Concurrency: Run may be called from several goroutines for different
// tables; two rewrites of one table conflict in the catalog and one
// re-plans.
package rewrite
