from inboxd.cli import main

raise SystemExit(main())
