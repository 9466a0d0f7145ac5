//! A fresh database for one test, on either engine: a SQLite file in its own temporary directory, or a new database
//! on the PostgreSQL server of `HERALD_TEST_POSTGRES_URL` (started by scripts/test). Shared by the test binaries
//! that run on both engines (`tests/api/store.rs`, `tests/stories/`).

use sqlx::{Connection, Executor};

/// The database's URL; the temporary directory of a SQLite one lives as long as this.
pub struct FreshDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

/// A new, empty database on `engine` (`sqlite` or `postgres`), its PostgreSQL name starting with `prefix`.
pub async fn fresh_db(engine: &str, prefix: &str) -> FreshDb {
    if engine == "sqlite" {
        let dir = tempfile::tempdir().expect("tmp");
        return FreshDb {
            url: format!("sqlite://{}/{prefix}.db", dir.path().display()),
            _dir: Some(dir),
        };
    }
    let base = std::env::var("HERALD_TEST_POSTGRES_URL")
        .expect("HERALD_TEST_POSTGRES_URL is not set: run the suite with scripts/test, which starts PostgreSQL");
    let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&base).await.expect("connect to PostgreSQL");
    conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .expect("create database");
    let (server, _) = base.rsplit_once('/').expect("a database URL");
    FreshDb {
        url: format!("{server}/{name}"),
        _dir: None,
    }
}
